//! Sections, variables, scopes, tools and the assemble hook, on a real kernel.

use dsh_kernel::{HookOptions, Kernel, PluginRegistry};
use dsh_llm::ToolSpec;
use dsh_system_prompt::{
    AssembleContext, ContextSection, HARNESS_IDENTITY, Section, SystemPromptAssemble,
    SystemPromptError, SystemPromptPlugin, TemplateError, order,
};
use dsh_tools::ToolFilter;
use serde_json::json;

use crate::common::{cx, env, tool};

#[tokio::test]
async fn identity_persona_and_sections_are_ordered_and_joined() {
    let e = env(json!({"persona": "You run {{model}} via {{provider}} in {{cwd}}."})).await;
    e.prompt
        .section(&e.root, Section::new("b-extra", "B").with_order(50))
        .unwrap();
    e.prompt
        .section(&e.root, Section::new("a-extra", "A").with_order(50))
        .unwrap();
    e.prompt
        .section(&e.root, Section::new("blank", "  \n").with_order(60))
        .unwrap();
    e.prompt
        .section(&e.root, Section::new("first", "F").with_order(-200))
        .unwrap();
    let a = e.prompt.assemble(cx()).await.unwrap();
    let names: Vec<&str> = a.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["first", "identity", "persona", "a-extra", "b-extra"]
    );
    assert_eq!(
        a.prompt(),
        format!(
            "F\n\n{HARNESS_IDENTITY}\n\nYou run deepseek-chat via deepseek in /home/u/proj.\n\nA\n\nB"
        )
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn identity_can_be_turned_off_and_an_empty_assembly_renders_nothing() {
    let e = env(json!({"includeHarnessIdentity": false})).await;
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert!(a.sections.is_empty());
    assert_eq!(a.prompt(), "");
    assert!(a.tools.is_empty());
    e.kernel.dispose().await;
}

#[tokio::test]
async fn unknown_or_valueless_variable_fails_the_assembly_not_the_service() {
    let e = env(json!({"persona": "In {{cwd}}, use {{sandbox}}."})).await;
    let err = e.prompt.assemble(cx()).await.unwrap_err();
    assert_eq!(
        err,
        SystemPromptError::Template {
            section: "persona".into(),
            error: TemplateError::Unknown("sandbox".into()),
        }
    );
    assert_eq!(
        err.to_string(),
        "system prompt section `persona`: unknown variable {{sandbox}}"
    );
    assert_eq!(err.code(), "SYSTEM_PROMPT");
    // The same service serves the next assembly once the variable exists.
    let a = e
        .prompt
        .assemble(cx().with_variable("sandbox", "bwrap"))
        .await
        .unwrap();
    assert!(a.prompt().ends_with("In /home/u/proj, use bwrap."));
    // A known variable without a value is an error too.
    let mut no_cwd = cx().with_variable("sandbox", "x");
    no_cwd.cwd = None;
    assert_eq!(
        e.prompt.assemble(no_cwd).await.unwrap_err(),
        SystemPromptError::Template {
            section: "persona".into(),
            error: TemplateError::Valueless("cwd".into()),
        }
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn raw_sections_and_substituted_values_are_not_rescanned() {
    let e = env(json!({"includeHarnessIdentity": false, "persona": "cwd={{cwd}}"})).await;
    e.prompt
        .section(
            &e.root,
            Section::new("code", "use {{x}} literally")
                .with_order(1)
                .raw(),
        )
        .unwrap();
    let a = e
        .prompt
        .assemble(AssembleContext::new("p", "m", "/a/{{model}}"))
        .await
        .unwrap();
    assert_eq!(a.prompt(), "cwd=/a/{{model}}\n\nuse {{x}} literally");
    e.kernel.dispose().await;
}

#[tokio::test]
async fn a_complete_section_replaces_the_prompt_and_two_are_an_error() {
    let e = env(json!({"persona": "persona"})).await;
    e.prompt
        .section(&e.root, Section::new("extra", "extra").with_order(5))
        .unwrap();
    let reg = e
        .prompt
        .section(
            &e.root,
            Section::new("override", "Only this, on {{model}}.").complete(),
        )
        .unwrap();
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(a.prompt(), "Only this, on deepseek-chat.");
    assert_eq!(a.sections.len(), 1);

    let reg2 = e
        .prompt
        .section(&e.root, Section::new("another", "x").complete())
        .unwrap();
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap_err(),
        SystemPromptError::MultipleComplete {
            first: "another".into(),
            second: "override".into(),
        }
    );
    // Disposing the registrations restores the normal prompt.
    reg.dispose();
    reg2.dispose();
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(
        a.prompt(),
        format!("{HARNESS_IDENTITY}\n\npersona\n\nextra")
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn computed_sections_see_the_context_and_their_failures_are_errors() {
    let e = env(json!({"includeHarnessIdentity": false})).await;
    e.prompt
        .section(
            &e.root,
            Section::computed("who", |c: &AssembleContext| {
                Ok(format!(
                    "agent {} on {{{{model}}}}",
                    c.agent_id.as_deref().unwrap_or("?")
                ))
            }),
        )
        .unwrap();
    let a = e.prompt.assemble(cx().with_agent_id("s-1")).await.unwrap();
    assert_eq!(a.prompt(), "agent s-1 on deepseek-chat");

    let reg = e
        .prompt
        .section(
            &e.root,
            Section::computed("broken", |_c: &AssembleContext| Err("no data".into())),
        )
        .unwrap();
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap_err().to_string(),
        "system prompt section `broken` failed: no data"
    );
    reg.dispose();
    e.prompt
        .section(
            &e.root,
            Section::computed("panics", |_c: &AssembleContext| -> Result<String, _> {
                panic!("boom")
            }),
        )
        .unwrap();
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap_err(),
        SystemPromptError::Section {
            section: "panics".into(),
            message: "panicked: boom".into(),
        }
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn duplicate_and_invalid_registrations_are_refused() {
    let e = env(json!({})).await;
    let err = e
        .prompt
        .section(&e.root, Section::new("persona-x", "a"))
        .and_then(|_| e.prompt.section(&e.root, Section::new("persona-x", "b")))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "system prompt section `persona-x` is already registered globally by `root`"
    );
    assert!(e.prompt.section(&e.root, Section::new(" ", "a")).is_err());
    assert!(
        e.prompt
            .runtime_context(&e.root, Section::new("ctx", "a").complete())
            .is_err()
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn scoped_sections_are_visible_to_their_agent_only_and_die_with_the_scope() {
    let e = env(json!({"includeHarnessIdentity": false, "persona": "global persona"})).await;
    let scope = e.root.scope("agent-1").unwrap();
    e.prompt
        .section(scope.ctx(), Section::new("persona", "agent persona"))
        .unwrap();
    e.prompt
        .section(
            scope.ctx(),
            Section::new("notes", "agent notes").with_order(1),
        )
        .unwrap();
    let in_scope = cx().with_scope(scope.ctx().scope_key());
    assert_eq!(
        e.prompt.assemble(in_scope.clone()).await.unwrap().prompt(),
        "agent persona\n\nagent notes"
    );
    let other = cx().with_scope(Some("agent-2".into()));
    assert_eq!(
        e.prompt.assemble(other).await.unwrap().prompt(),
        "global persona"
    );
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap().prompt(),
        "global persona"
    );
    scope.dispose().await;
    assert_eq!(
        e.prompt.assemble(in_scope).await.unwrap().prompt(),
        "global persona"
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn tools_visible_to_the_scope_are_part_of_the_assembly() {
    let e = env(json!({"includeHarnessIdentity": false})).await;
    for name in ["write", "bash", "read"] {
        e.tools.register(&e.root, tool(name)).unwrap();
    }
    let scope = e.root.scope("agent-1").unwrap();
    e.tools
        .restrict(scope.ctx(), ToolFilter::deny(["bash"]))
        .unwrap();
    e.tools.register(scope.ctx(), tool("todo_write")).unwrap();
    e.prompt
        .section(
            &e.root,
            Section::new("tool:bash", "Check the [exit code: N] marker.")
                .with_order(order::TOOL_BASH)
                .requires_tool("bash"),
        )
        .unwrap();

    let global = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(global.tool_names(), ["bash", "read", "write"]);
    assert_eq!(global.prompt(), "Check the [exit code: N] marker.");
    assert_eq!(
        global.tools[1],
        ToolSpec::new(
            "read",
            "The read tool.",
            json!({"type":"object","properties":{}})
        )
    );

    let scoped = e
        .prompt
        .assemble(cx().with_scope(scope.ctx().scope_key()))
        .await
        .unwrap();
    assert_eq!(scoped.tool_names(), ["read", "todo_write", "write"]);
    assert_eq!(scoped.prompt(), "", "bash guidance needs the bash tool");
    e.kernel.dispose().await;
}

async fn ordered_env(order: serde_json::Value) -> crate::common::Env {
    let e = env(json!({"includeHarnessIdentity": false, "toolOrder": order})).await;
    for name in ["write", "bash", "read", "grep", "edit"] {
        e.tools.register(&e.root, tool(name)).unwrap();
    }
    e
}

#[tokio::test]
async fn tool_order_lists_first_with_an_unlisted_rest_entry() {
    let e = ordered_env(json!(["read", "<unlisted-tools>", "bash"])).await;
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(a.tool_names(), ["read", "edit", "grep", "write", "bash"]);
    e.kernel.dispose().await;

    let e = ordered_env(json!(["write", "read"])).await;
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(a.tool_names(), ["write", "read", "bash", "edit", "grep"]);
    e.kernel.dispose().await;

    let e = ordered_env(json!(["read", "web_fetch"])).await;
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap_err().to_string(),
        "toolOrder names `web_fetch`, which is not a registered tool"
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn bad_config_fails_the_plugin_with_a_named_field() {
    let mut reg = PluginRegistry::new();
    reg.register::<SystemPromptPlugin>();
    let kernel = Kernel::new(reg);
    let err = kernel
        .mount("system-prompt", json!({"persona": "x", "personality": 1}))
        .unwrap_err();
    assert!(err.to_string().contains("personality"), "{err}");
    let fiber = kernel
        .mount("system-prompt", json!({"toolOrder": ["read", "read"]}))
        .unwrap();
    let err = fiber.ready().await.unwrap_err();
    assert!(
        err.to_string()
            .contains("toolOrder[1]: `read` is listed twice"),
        "{err}"
    );
    kernel.dispose().await;
}

#[tokio::test]
async fn the_assemble_hook_is_authoritative() {
    let e = env(json!({"includeHarnessIdentity": false, "persona": "on {{model}}"})).await;
    e.tools.register(&e.root, tool("read")).unwrap();
    // A listener that rewrites the input and edits the output.
    e.root
        .hook::<SystemPromptAssemble, _, _>(|mut input: AssembleContext, next| async move {
            input.model = Some("deepseek-reasoner".into());
            let mut out = next.run(input).await?;
            out.tools.clear();
            out.runtime_context
                .push(ContextSection::new("hook:note", "from the hook"));
            Ok(out)
        })
        .unwrap();
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(a.prompt(), "on deepseek-reasoner");
    assert!(a.tools.is_empty());
    assert_eq!(
        a.runtime_context,
        [ContextSection::new("hook:note", "from the hook")]
    );
    // default_assembly bypasses the hook.
    let d = e.prompt.default_assembly(&cx()).unwrap();
    assert_eq!(d.prompt(), "on deepseek-chat");
    assert_eq!(d.tool_names(), ["read"]);
    e.kernel.dispose().await;
}

#[tokio::test]
async fn scoped_hook_listeners_only_see_their_agent_and_panics_become_errors() {
    let e = env(json!({"includeHarnessIdentity": false, "persona": "base"})).await;
    let scope = e.root.scope("agent-1").unwrap();
    scope
        .ctx()
        .hook_with::<SystemPromptAssemble, _, _>(
            HookOptions { prepend: true },
            |_input: AssembleContext, _next| async move {
                Err(SystemPromptError::Registration(
                    dsh_system_prompt::RegistrationError::EmptyName,
                ))
            },
        )
        .unwrap();
    assert_eq!(e.prompt.assemble(cx()).await.unwrap().prompt(), "base");
    assert_eq!(
        e.prompt
            .assemble(cx().with_scope(Some("agent-1".into())))
            .await
            .unwrap_err(),
        SystemPromptError::Registration(dsh_system_prompt::RegistrationError::EmptyName)
    );
    scope.dispose().await;

    e.root
        .hook::<SystemPromptAssemble, _, _>(|_input: AssembleContext, _next| async move {
            panic!("listener exploded")
        })
        .unwrap();
    assert_eq!(
        e.prompt.assemble(cx()).await.unwrap_err(),
        SystemPromptError::Panicked("listener exploded".into())
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn runtime_context_sections_are_rendered_apart_from_the_prompt() {
    let e = env(json!({"includeHarnessIdentity": false, "persona": "P"})).await;
    e.prompt
        .runtime_context(
            &e.root,
            Section::new("approval:policy", "Approval policy: ask.")
                .with_order(order::APPROVAL_POLICY),
        )
        .unwrap();
    e.prompt
        .runtime_context(
            &e.root,
            Section::computed("sandbox:policy", |c: &AssembleContext| {
                Ok(format!(
                    "Sandbox: workspace-write under \"{}\".",
                    c.cwd.as_deref().unwrap_or_default()
                ))
            })
            .with_order(order::SANDBOX_POLICY),
        )
        .unwrap();
    e.prompt
        .runtime_context(&e.root, Section::new("empty", "").with_order(1))
        .unwrap();
    let a = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(a.prompt(), "P");
    assert_eq!(
        a.runtime_context,
        [
            ContextSection::new(
                "sandbox:policy",
                "Sandbox: workspace-write under \"/home/u/proj\"."
            ),
            ContextSection::new("approval:policy", "Approval policy: ask."),
        ]
    );
    assert_eq!(
        e.prompt.render_runtime_context(&cx()).unwrap(),
        a.runtime_context
    );
    e.kernel.dispose().await;
}

#[tokio::test]
async fn a_plugin_section_goes_away_when_the_plugin_unloads() {
    use dsh_kernel::{BoxError, Ctx, Dep, EmptyConfig, Plugin};
    use dsh_system_prompt::SystemPrompt;

    struct Guidance;
    impl Plugin for Guidance {
        const NAME: &'static str = "guidance";
        type Config = EmptyConfig;
        fn deps() -> Vec<Dep> {
            vec![Dep::on::<dyn SystemPrompt>()]
        }
        async fn apply(ctx: Ctx, _: EmptyConfig) -> Result<(), BoxError> {
            let sp = ctx.dep::<dyn SystemPrompt>()?;
            sp.section(&ctx, Section::new("guidance", "Be brief.").with_order(10))?;
            Ok(())
        }
    }

    let e = env(json!({"includeHarnessIdentity": false})).await;
    let fiber = e.root.mount_plugin::<Guidance>(EmptyConfig {}).unwrap();
    fiber.ready().await.unwrap();
    assert_eq!(e.prompt.assemble(cx()).await.unwrap().prompt(), "Be brief.");
    fiber.dispose().await;
    assert_eq!(e.prompt.assemble(cx()).await.unwrap().prompt(), "");
    e.kernel.dispose().await;
}

#[tokio::test]
async fn tool_order_skips_tools_an_agent_filter_hides() {
    let e = ordered_env(json!(["bash", "<unlisted-tools>", "read"])).await;
    let scope = e.root.scope("sandboxed").unwrap();
    e.tools
        .restrict(scope.ctx(), ToolFilter::deny(["bash"]))
        .unwrap();
    let global = e.prompt.assemble(cx()).await.unwrap();
    assert_eq!(
        global.tool_names(),
        ["bash", "edit", "grep", "write", "read"]
    );
    let scoped = e
        .prompt
        .assemble(cx().with_scope(scope.ctx().scope_key()))
        .await
        .unwrap();
    assert_eq!(scoped.tool_names(), ["edit", "grep", "write", "read"]);
    e.kernel.dispose().await;
}

#[test]
fn tool_order_rejections_by_variant() {
    use dsh_system_prompt::{ToolOrderError, check_tool_order};
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(check_tool_order(&names(&["read", "bash"])), Ok(()));
    assert_eq!(
        check_tool_order(&names(&["read", " "])),
        Err(ToolOrderError::EmptyName { index: 1 })
    );
    assert_eq!(
        check_tool_order(&names(&["read", "bash", "read"])),
        Err(ToolOrderError::Duplicate {
            index: 2,
            name: "read".into()
        })
    );
}

#[tokio::test]
async fn registration_rejections_by_variant() {
    use dsh_system_prompt::RegistrationError;
    let e = env(json!({"includeHarnessIdentity": false})).await;
    assert_eq!(
        e.prompt
            .section(&e.root, Section::new(" ", "x"))
            .unwrap_err(),
        SystemPromptError::Registration(RegistrationError::EmptyName)
    );
    e.prompt
        .section(&e.root, Section::new("twice", "x"))
        .unwrap();
    match e.prompt.section(&e.root, Section::new("twice", "y")) {
        Err(SystemPromptError::Registration(RegistrationError::Duplicate {
            section,
            where_,
            ..
        })) => {
            assert_eq!(section, "twice");
            assert_eq!(where_, "globally");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_builtin_persona_is_small_raw_and_the_same_in_every_directory() {
    assert!(dsh_system_prompt::DSH_PERSONA.len() < 3 * 1024);
    let e = env(json!({"builtinPersona": true})).await;
    let mut other = cx();
    other.cwd = Some("/somewhere/else".into());
    other.model = Some("another-model".into());
    let a = e.prompt.assemble(cx()).await.unwrap();
    let b = e.prompt.assemble(other).await.unwrap();
    assert_eq!(a.prompt(), b.prompt(), "no volatile values");
    assert_eq!(
        a.prompt(),
        format!(
            "{HARNESS_IDENTITY}\n\n{}",
            dsh_system_prompt::DSH_PERSONA.trim_end()
        )
    );
    // An explicit persona still wins.
    let e2 = env(json!({"builtinPersona": true, "persona": "mine"})).await;
    let c = e2.prompt.assemble(cx()).await.unwrap();
    assert_eq!(c.prompt(), format!("{HARNESS_IDENTITY}\n\nmine"));
    e.kernel.dispose().await;
    e2.kernel.dispose().await;
}
