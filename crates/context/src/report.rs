//! Everything the context plugin would load for a directory, for `dsh context` and benches.

use std::path::PathBuf;

use crate::instructions::{self, Discovery, InstructionsConfig};
use crate::project::ProjectPaths;
use crate::{commands, skills};

/// What would be loaded for one working directory.
#[derive(Clone, Debug)]
pub struct ContextReport {
    /// The directories used.
    pub paths: ProjectPaths,
    /// Instruction files, in injection order, and the skipped ones.
    pub instructions: Discovery,
    /// The skill roots searched, by rank.
    pub skill_roots: Vec<skills::SkillRoot>,
    /// Skills, problems and shadowed ones.
    pub skills: skills::SkillSet,
    /// The command folders searched, best first.
    pub command_folders: Vec<PathBuf>,
    /// Custom commands and problems.
    pub commands: commands::CommandSet,
}

/// Loads everything for `paths`.
pub fn load(
    paths: ProjectPaths,
    config: &InstructionsConfig,
    custom_skill_dirs: &[PathBuf],
) -> ContextReport {
    let instructions = instructions::discover(&paths, config);
    let skill_roots = skills::roots(&paths, custom_skill_dirs);
    let skills = skills::discover(&skill_roots);
    let command_folders = commands::folders(&paths);
    let commands = commands::discover(&command_folders);
    ContextReport {
        paths,
        instructions,
        skill_roots,
        skills,
        command_folders,
        commands,
    }
}

impl ContextReport {
    /// The slash names a front end should offer: custom commands (`/name`, description and
    /// argument hint) and user-invocable skills, sorted, a command winning a shared name.
    pub fn slash_commands(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .commands
            .commands
            .iter()
            .map(|c| {
                let hint = c
                    .argument_hint
                    .as_deref()
                    .map(|h| format!("{h} "))
                    .unwrap_or_default();
                (format!("/{}", c.name), format!("{hint}{}", c.description))
            })
            .collect();
        for s in self.skills.skills.iter().filter(|s| s.user_invocable) {
            let name = format!("/{}", s.name);
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, format!("skill: {}", s.description)));
            }
        }
        out.sort();
        out
    }
}
