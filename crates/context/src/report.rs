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
