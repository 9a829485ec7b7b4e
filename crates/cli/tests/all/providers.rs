//! The Messages routes end to end: `dsh exec --provider deepseek-anthropic|anthropic` against
//! the testkit's Anthropic dialect.

use dsh_testkit::anthropic::{Message, StreamUsage};
use dsh_testkit::validate::common_prefix_len;
use serde_json::Value;

use crate::support::*;

fn exec_on(env: &Env, route: &str, args: &[&str]) -> std::process::Output {
    let base = env.server().base_url();
    env.dsh()
        .env("DEEPSEEK_ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_BASE_URL", &base)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .arg("exec")
        .arg("--provider")
        .arg(route)
        .args(args)
        .output()
        .unwrap()
}

fn messages_of(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

/// The `messages` array of a body as sent, without its closing bracket.
fn open_messages(body: &[u8]) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(borrow)]
        messages: &'a serde_json::value::RawValue,
    }
    let raw: Raw<'_> = serde_json::from_slice(body).unwrap();
    let m = raw.messages.get().as_bytes();
    m[..m.len() - 1].to_vec()
}

#[test]
fn deepseek_messages_route_runs_a_tool_turn_and_passes_thinking_back() {
    let env = Env::new();
    env.server().validate_requests(true);
    let args = r#"{"command": "echo MESSAGES_OK", "description":"Say it"}"#;
    env.server().push(
        Message::new()
            .thinking("I should run the command.", "sig-abc-1")
            .text("Running it.")
            .tool_use("toolu_01", "bash", args)
            .chars_per_delta(5)
            .usage(StreamUsage::new(120, 30).cache_read(64))
            .reply(),
    );
    env.server().push(
        Message::new()
            .thinking("Done now.", "sig-abc-2")
            .text("DONE")
            .reply(),
    );
    let out = exec_on(&env, "deepseek-anthropic", &["Run it"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "DONE\n");

    let first = env.server().request(0).unwrap();
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    let body = first.body_json().unwrap();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "stream",
            "messages",
            "max_tokens",
            "thinking",
            "output_config",
            "system",
            "tools"
        ]
    );
    assert_eq!(body["model"], "deepseek-flash");
    assert_eq!(body["thinking"], serde_json::json!({"type": "enabled"}));
    assert_eq!(body["output_config"], serde_json::json!({"effort": "high"}));
    assert!(
        body["system"]
            .as_str()
            .unwrap()
            .contains("You are a software engineer")
    );
    assert!(
        !first.body_text().contains("cache_control"),
        "no breakpoints on DeepSeek"
    );

    let second = env.server().request(1).unwrap();
    let body = second.body_json().unwrap();
    let messages = messages_of(&body);
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["content"][0],
        serde_json::json!({"type":"thinking","thinking":"I should run the command.","signature":"sig-abc-1"})
    );
    assert_eq!(assistant["content"][1]["text"], "Running it.");
    assert_eq!(assistant["content"][2]["type"], "tool_use");
    assert!(
        second.body_text().contains(&format!("\"input\":{args}")),
        "raw arguments sent byte-exact: {}",
        second.body_text()
    );
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "user");
    assert_eq!(result["content"][0]["type"], "tool_result");
    assert_eq!(result["content"][0]["tool_use_id"], "toolu_01");
    assert!(
        result["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("MESSAGES_OK"),
        "{result}"
    );
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());

    // The log keeps the signature in the replay state and the cache reads in the usage.
    let events = env.stored_events();
    let message = events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    let source = &message["data"]["message"]["source"];
    assert_eq!(source["provider"], "deepseek-anthropic");
    assert_eq!(
        source["replayState"]["response"]["kind"],
        "deepseek-messages"
    );
    assert_eq!(source["replayState"]["blocks"][0]["signature"], "sig-abc-1");
    assert_eq!(message["data"]["usage"]["cacheReadTokens"], 64);
    assert_eq!(message["data"]["usage"]["inputTokens"], 120);
}

#[test]
fn twenty_steps_on_the_messages_route_keep_the_prefix() {
    let env = Env::new();
    env.server().validate_requests(true);
    for i in 0..19 {
        env.server().push(
            Message::new()
                .thinking(&format!("step {i}"), &format!("sig-{i}"))
                .tool_use(
                    &format!("toolu_{i}"),
                    "bash",
                    &format!(r#"{{"command":"echo step {i}","description":"Step {i}"}}"#),
                )
                .reply(),
        );
    }
    env.server().push(Message::new().text("ALL DONE").reply());
    let out = exec_on(&env, "deepseek-anthropic", &["Take twenty steps"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ALL DONE\n");
    let requests = env.server().requests();
    assert_eq!(requests.len(), 20);
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
    let mut stability = Vec::new();
    for w in requests.windows(2) {
        let (prev, cur) = (open_messages(&w[0].body), open_messages(&w[1].body));
        stability.push(common_prefix_len(&prev, &cur) as f64 / prev.len() as f64);
        // Everything before `messages` and the whole previous body up to its end is kept.
        assert!(common_prefix_len(&w[0].body, &w[1].body) >= prev.len());
    }
    assert!(stability.iter().all(|s| *s == 1.0), "{stability:?}");
    assert!(
        env.server().kept_one_connection(),
        "one connection for the run, not {}",
        env.server().connection_count()
    );
}

#[test]
fn the_anthropic_route_places_cache_breakpoints_and_budgets_thinking() {
    let env = Env::new();
    env.server().validate_requests(true);
    for i in 0..3 {
        env.server().push(
            Message::new()
                .model("claude-sonnet-4-5")
                .thinking(&format!("think {i}"), &format!("sig-{i}"))
                .tool_use(
                    &format!("toolu_{i}"),
                    "bash",
                    r#"{"command":"true","description":"noop"}"#,
                )
                .usage(StreamUsage::new(10, 5).cache_read(100).cache_creation(20))
                .reply(),
        );
    }
    env.server()
        .push(Message::new().model("claude-sonnet-4-5").text("OK").reply());
    let out = exec_on(&env, "anthropic", &["Go"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "OK\n");
    let requests = env.server().requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
        let body = r.body_json().unwrap();
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["thinking"]["type"], "enabled");
        assert_eq!(body["thinking"]["budget_tokens"], 16384);
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        let marks = r.body_text().matches("\"cache_control\"").count();
        assert!((2..=4).contains(&marks), "{marks} breakpoints");
        // The last block of the last message is a breakpoint.
        let last = messages_of(&body).last().unwrap();
        let block = last["content"].as_array().unwrap().last().unwrap();
        assert_eq!(block["cache_control"]["type"], "ephemeral", "{last}");
    }
    // The previous request's end stays a breakpoint, so this step reads what the last wrote.
    let third = requests[2].body_json().unwrap();
    let users: Vec<&Value> = messages_of(&third)
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    let prev_end = users[users.len() - 2]["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(prev_end["cache_control"]["type"], "ephemeral");
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
    let events = env.stored_events();
    let usage = &events
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap()["data"]["usage"];
    assert_eq!(
        (
            usage["cacheReadTokens"].as_u64(),
            usage["cacheWriteTokens"].as_u64()
        ),
        (Some(100), Some(20))
    );
}

#[test]
fn an_unknown_provider_names_the_known_routes() {
    let env = Env::new();
    let out = exec_on(&env, "nope", &["hi"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("unknown provider `nope`"), "{err}");
    for route in [
        "deepseek",
        "deepseek-anthropic",
        "anthropic",
        "openai-compatible",
    ] {
        assert!(err.contains(route), "{route} named in: {err}");
    }
    assert_eq!(env.server().request_count(), 0);
    assert!(
        session_files(&env.home.path().join("sessions")).is_empty(),
        "nothing stored for a wrong route"
    );
}

#[test]
fn dsh_models_lists_every_route_with_its_catalog() {
    let env = Env::new();
    let out = env.dsh().arg("models").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "deepseek (plugin deepseek; default model deepseek-flash)",
        "deepseek-anthropic (plugin anthropic; default model deepseek-flash)",
        "anthropic (plugin anthropic; default model claude-sonnet-4-5)",
        "  deepseek-flash  context 1000000  max output 393216  USD/M hit 0.028 miss 0.28 output 0.42",
    ] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
    assert!(
        text.contains("systemPromptUpdate in-history  toolUpdate addition-only"),
        "{text}"
    );
    // Anthropic bills cache writes; Claude models take images.
    assert!(
        text.contains(
            "  claude-sonnet-4-5  context 200000  max output 64000  USD/M hit 0.3 miss 3 output 15 cache-write 3.75  efforts off|low|high|max  images"
        ),
        "{text}"
    );
}

#[test]
fn dsh_models_shows_a_configured_off_peak_window() {
    let env = Env::new();
    let patch = env.patch(
        "offpeak.yaml",
        "plugins:
  - id: deepseek
    name: deepseek
    config:
      models:
        - id: deepseek-flash
          contextWindow: 1000000
          defaultMaxTokens: 256000
          pricing:
            cacheHitInput: 0.07
            cacheMissInput: 0.27
            output: 1.1
            offPeak:
              window: { start: \"16:30\", end: \"00:30\" }
              cacheHitInput: 0.035
              cacheMissInput: 0.135
              output: 0.55
",
    );
    let out = env
        .dsh()
        .args(["models", "--patch"])
        .arg(&patch)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "USD/M hit 0.07 miss 0.27 output 1.1  off-peak 16:30-00:30 UTC hit 0.035 miss 0.135 output 0.55"
        ),
        "{text}"
    );
    // A window that is not a time of day is refused, naming the problem.
    let bad = env.patch(
        "badpeak.yaml",
        "plugins:
  - id: deepseek
    name: deepseek
    config:
      models:
        - id: deepseek-flash
          contextWindow: 1000000
          defaultMaxTokens: 256000
          pricing: { cacheHitInput: 0.07, cacheMissInput: 0.27, output: 1.1, offPeak: { window: { start: \"25:00\", end: \"01:00\" }, cacheHitInput: 0, cacheMissInput: 0, output: 0 } }
",
    );
    let out = env
        .dsh()
        .args(["models", "--patch"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stderr(&out).contains("`HH:MM`"), "{}", stderr(&out));
}

const OPENAI_ROW: &str = "plugins:
  - id: openai-compatible
    name: openai-compatible
    config:
      models:
        - { id: qwen3-coder, contextWindow: 262144, defaultMaxTokens: 32768, reasoning: true }
      reasoningPassBack: reasoning
";

fn exec_openai(env: &Env, args: &[&str]) -> std::process::Output {
    let patch = env.patch("openai.yaml", OPENAI_ROW);
    env.dsh()
        .env("OPENAI_BASE_URL", format!("{}/v1", env.server().base_url()))
        .env("OPENAI_API_KEY", "sk-openai-test")
        .arg("exec")
        .arg("--patch")
        .arg(&patch)
        .args(["--provider", "openai-compatible"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn openai_compatible_route_runs_twenty_steps_passing_reasoning_back() {
    use dsh_testkit::Completion;
    use dsh_testkit::openai::{self, ReasoningField};
    let env = Env::new();
    for i in 0..19 {
        let c = Completion::new()
            .model("qwen3-coder")
            .reasoning(&format!("thinking {i}"))
            .tool_call_with_id(
                &format!("call_{i}"),
                "bash",
                &format!(r#"{{"command": "echo OAI_{i}","description":"Step {i}"}}"#),
            );
        env.server()
            .push(openai::reply(&c, &ReasoningField::Reasoning));
    }
    env.server().push(openai::reply(
        &Completion::new().model("qwen3-coder").text("FINISHED"),
        &ReasoningField::Reasoning,
    ));
    let out = exec_openai(&env, &["Take twenty steps"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "FINISHED\n");
    let requests = env.server().requests();
    assert_eq!(requests.len(), 20);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].bearer(), Some("sk-openai-test"));
    let first = requests[0].body_json().unwrap();
    assert_eq!(first["model"], "qwen3-coder");
    assert_eq!(first["reasoning_effort"], "high");
    assert_eq!(first["max_tokens"], 32768);
    // Step 2 passes step 1's reasoning back in the row's dialect, arguments byte-exact.
    let second = requests[1].body_json().unwrap();
    let assistant = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    assert_eq!(assistant["reasoning"], "thinking 0");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        r#"{"command": "echo OAI_0","description":"Step 0"}"#
    );
    let tool = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"].as_str().unwrap().contains("OAI_0"),
        "{tool}"
    );
    // Prefix stability 1.0: every request byte-extends the previous one.
    assert_eq!(env.server().dsh_rule_violations(), Vec::<String>::new());
    for w in requests.windows(2) {
        let prev = open_messages(&w[0].body);
        assert_eq!(
            common_prefix_len(&prev, &open_messages(&w[1].body)),
            prev.len()
        );
    }
    assert!(
        env.server().kept_one_connection(),
        "{} connections",
        env.server().connection_count()
    );
}

#[test]
fn openai_compatible_without_a_key_says_which_variable() {
    let env = Env::new();
    let patch = env.patch("openai.yaml", OPENAI_ROW);
    let out = env
        .dsh()
        .env("OPENAI_BASE_URL", env.server().base_url())
        .args(["exec", "--patch"])
        .arg(&patch)
        .args(["--provider", "openai-compatible", "hi"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains("MISSING_CREDENTIAL") && err.contains("OPENAI_API_KEY"),
        "{err}"
    );
    assert_eq!(env.server().request_count(), 0);
}
