//! The pure policy: defaults, backoff, budget, Retry-After, records.

use std::time::Duration;

use dsh_llm::{FailureCode, LlmFailure, codes};
use dsh_llm_retry::{GiveUp, RetryDecision, RetryMode, RetryPolicy, RetryRecord};
use proptest::prelude::*;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/upstream-sessions/v3/provider-retry/session.v3.jsonl"
);

fn fixture_policy() -> RetryPolicy {
    serde_json::from_value(json!({
        "maxRetries": 2, "initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0
    }))
    .unwrap()
}

fn failure(code: FailureCode) -> LlmFailure {
    LlmFailure::new(code, "boom")
}

#[test]
fn defaults_are_upstreams() {
    let p: RetryPolicy = serde_json::from_value(json!({})).unwrap();
    assert_eq!(p, RetryPolicy::default());
    assert_eq!(p.mode, RetryMode::Normal);
    assert_eq!(p.max_retries, 5);
    assert_eq!(
        p.retryable,
        [
            "EMPTY_RESPONSE",
            "RATE_LIMIT",
            "SERVER",
            "TIMEOUT",
            "TRANSPORT"
        ]
    );
    assert_eq!((p.initial_delay_ms, p.max_delay_ms), (500, 10_000));
    assert_eq!(p.jitter_ratio, 0.1);
    assert_eq!(
        p.policy_key(),
        r#"["normal",5,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
    );
    let err = serde_json::from_value::<RetryPolicy>(json!({"maxRetry": 1})).unwrap_err();
    assert!(err.to_string().contains("maxRetry"), "{err}");
}

#[test]
fn validation_names_the_problem() {
    let mut p = RetryPolicy {
        jitter_ratio: 1.5,
        ..RetryPolicy::default()
    };
    assert_eq!(
        p.validate().unwrap_err().to_string(),
        "jitterRatio must be a number in [0, 1], got 1.5"
    );
    p.jitter_ratio = 0.0;
    p.retryable.push(" ".into());
    assert_eq!(
        p.validate().unwrap_err().to_string(),
        "retryable[5]: empty failure code"
    );
    assert!(RetryPolicy::default().validate().is_ok());
}

#[test]
fn backoff_doubles_up_to_the_cap_with_jitter_around_it() {
    let p = RetryPolicy::default();
    let ms = |k: u32, r: f64| p.backoff(k, r).as_millis() as u64;
    // r = 0.5: factor exactly 1 → 0.5, 1, 2, 4, 8 s, then the cap.
    assert_eq!(
        (1..=7).map(|k| ms(k, 0.5)).collect::<Vec<_>>(),
        [500, 1000, 2000, 4000, 8000, 10_000, 10_000]
    );
    // r = 0: factor 0.9.
    assert_eq!(
        (1..=6).map(|k| ms(k, 0.0)).collect::<Vec<_>>(),
        [450, 900, 1800, 3600, 7200, 9000]
    );
    // r → 1: factor → 1.1, never beyond the cap.
    assert_eq!(ms(1, 0.999_999), 550);
    assert_eq!(ms(5, 0.999_999), 8800);
    assert_eq!(ms(6, 0.999_999), 10_000);
    // Huge retry numbers do not overflow.
    assert_eq!(ms(u32::MAX, 0.5), 10_000);
}

proptest! {
    #[test]
    fn backoff_stays_within_its_band(
        retry in 1u32..200,
        rand in 0.0f64..1.0,
        initial in 0u64..5_000,
        max in 0u64..60_000,
        jitter in 0.0f64..=1.0,
    ) {
        let p = RetryPolicy {
            initial_delay_ms: initial,
            max_delay_ms: max,
            jitter_ratio: jitter,
            ..RetryPolicy::default()
        };
        let d = p.backoff(retry, rand).as_millis() as f64;
        let base = (initial as f64 * 2f64.powi(retry as i32 - 1)).min(max as f64);
        prop_assert!(d <= max as f64);
        prop_assert!(d >= (base * (1.0 - jitter)).floor());
        prop_assert!(d <= (base * (1.0 + jitter)).ceil());
    }

    #[test]
    fn normal_mode_retries_exactly_the_retryable_codes_within_budget(
        code in prop::sample::select(vec![
            codes::EMPTY_RESPONSE, codes::RATE_LIMIT, codes::SERVER, codes::TIMEOUT,
            codes::TRANSPORT, codes::AUTH, codes::QUOTA, codes::CONTEXT_WINDOW_EXCEEDED,
            codes::STREAM_CLOSED, codes::ABORTED, codes::INVALID_REQUEST,
        ]),
        spent in 0u32..10,
        rand in 0.0f64..1.0,
    ) {
        let p = RetryPolicy::default();
        let d = p.decide(&failure(code.clone()), spent, rand);
        let retryable = p.is_retryable(&code);
        match d {
            RetryDecision::Retry { retry, delay } => {
                prop_assert!(retryable && spent < 5);
                prop_assert_eq!(retry, spent + 1);
                prop_assert!(delay <= Duration::from_millis(10_000));
            }
            RetryDecision::GiveUp(GiveUp::NotRetryable) => prop_assert!(!retryable),
            RetryDecision::GiveUp(GiveUp::Exhausted) => prop_assert!(retryable && spent >= 5),
            RetryDecision::GiveUp(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}

#[test]
fn budget_and_codes() {
    let p = RetryPolicy::default();
    assert!(matches!(
        p.decide(&failure(codes::SERVER), 0, 0.5),
        RetryDecision::Retry { retry: 1, delay } if delay == Duration::from_millis(500)
    ));
    assert!(matches!(
        p.decide(&failure(codes::SERVER), 4, 0.5),
        RetryDecision::Retry { retry: 5, delay } if delay == Duration::from_millis(8000)
    ));
    assert_eq!(
        p.decide(&failure(codes::SERVER), 5, 0.5),
        RetryDecision::GiveUp(GiveUp::Exhausted)
    );
    assert_eq!(
        p.decide(&failure(codes::AUTH), 0, 0.5),
        RetryDecision::GiveUp(GiveUp::NotRetryable)
    );
    assert_eq!(
        p.decide(&failure(codes::ABORTED), 0, 0.5),
        RetryDecision::GiveUp(GiveUp::NotRetryable)
    );
}

#[test]
fn retry_after_is_verbatim_within_the_cap_and_ends_retrying_beyond_it() {
    let p = RetryPolicy::default();
    let f = |ms: u64| failure(codes::RATE_LIMIT).with_retry_after_ms(Some(ms));
    assert_eq!(
        p.decide(&f(3_000), 0, 0.0),
        RetryDecision::Retry {
            retry: 1,
            delay: Duration::from_millis(3_000)
        },
        "no jitter on a provider delay"
    );
    assert_eq!(
        p.decide(&f(10_000), 2, 0.99),
        RetryDecision::Retry {
            retry: 3,
            delay: Duration::from_millis(10_000)
        }
    );
    assert_eq!(
        p.decide(&f(10_001), 0, 0.5),
        RetryDecision::GiveUp(GiveUp::RetryAfterTooLong)
    );
    // Zero is "no provider delay": the backoff applies.
    assert_eq!(
        p.decide(&f(0), 0, 0.5),
        RetryDecision::Retry {
            retry: 1,
            delay: Duration::from_millis(500)
        }
    );
}

#[test]
fn always_mode_retries_everything_without_limit() {
    let p = RetryPolicy {
        mode: RetryMode::Always,
        ..RetryPolicy::default()
    };
    for code in [codes::AUTH, codes::CONTEXT_WINDOW_EXCEEDED, codes::SERVER] {
        assert!(matches!(
            p.decide(&failure(code), 1_000, 0.5),
            RetryDecision::Retry { retry: 1001, delay } if delay == Duration::from_millis(10_000)
        ));
    }
    assert_eq!(
        p.decide(
            &failure(codes::RATE_LIMIT).with_retry_after_ms(Some(60_000)),
            0,
            0.5
        ),
        RetryDecision::Retry {
            retry: 1,
            delay: Duration::from_millis(60_000)
        }
    );
    assert_eq!(
        p.policy_key(),
        r#"["always",null,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
    );
}

#[test]
fn records_match_the_upstream_provider_retry_fixture() {
    let text = std::fs::read_to_string(FIXTURE).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(&l.replace("{{retry:1}}", "r1")).unwrap())
        .collect();
    let retry_row = rows.iter().find(|r| r["type"] == "llm/retry").unwrap();
    let started_row = rows
        .iter()
        .find(|r| r["type"] == "llm/retry-started")
        .unwrap();

    let policy = fixture_policy();
    let failure = LlmFailure::new(
        codes::EMPTY_RESPONSE,
        "model returned a completed response with no content",
    );
    let RetryDecision::Retry { retry, delay } = policy.decide(&failure, 0, 0.7) else {
        panic!("EMPTY_RESPONSE retries");
    };
    let record = RetryRecord {
        retry_id: "r1".into(),
        turn: 1,
        step: 1,
        provider: "deepseek-official".into(),
        policy,
        retry,
        delay_ms: delay.as_millis() as u64,
        failure,
    };
    assert_eq!(
        serde_json::to_string(&record.retry_data()).unwrap(),
        serde_json::to_string(&retry_row["data"]).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&record.started_data()).unwrap(),
        serde_json::to_string(&started_row["data"]).unwrap()
    );
}

#[test]
fn always_mode_records_omit_max_retries() {
    let record = RetryRecord {
        retry_id: "x".into(),
        turn: 2,
        step: 3,
        provider: "p".into(),
        policy: RetryPolicy {
            mode: RetryMode::Always,
            ..RetryPolicy::default()
        },
        retry: 7,
        delay_ms: 10_000,
        failure: failure(codes::AUTH).with_status(401),
    };
    let data = record.retry_data();
    assert_eq!(data["mode"], "always");
    assert!(data.get("maxRetries").is_none());
    assert_eq!(
        data["failure"],
        json!({"message": "boom", "code": "AUTH", "status": 401})
    );
}

#[test]
fn stream_closed_is_retried_by_default_and_configurable_back_to_no_retry() {
    let p = RetryPolicy::default();
    assert!(p.retry_stream_closed);
    assert!(matches!(
        p.decide(&failure(FailureCode::StreamClosed), 0, 0.5),
        RetryDecision::Retry { retry: 1, .. }
    ));
    // It shares the budget with the other codes.
    assert_eq!(
        p.decide(&failure(FailureCode::StreamClosed), 5, 0.5),
        RetryDecision::GiveUp(GiveUp::Exhausted)
    );
    // The key stays upstream's: the extra retry is not part of it.
    assert_eq!(
        p.policy_key(),
        r#"["normal",5,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]"#
    );
    let original: RetryPolicy =
        serde_json::from_value(json!({"retryStreamClosed": false})).unwrap();
    assert!(!original.retry_stream_closed);
    assert_eq!(
        original.decide(&failure(FailureCode::StreamClosed), 0, 0.5),
        RetryDecision::GiveUp(GiveUp::NotRetryable)
    );
    // Listing the code explicitly retries it whatever the switch says.
    let listed: RetryPolicy =
        serde_json::from_value(json!({"retryStreamClosed": false, "retryable": ["STREAM_CLOSED"]}))
            .unwrap();
    assert!(listed.is_retryable(&FailureCode::StreamClosed));
}

#[test]
fn unknown_retryable_codes_are_kept_verbatim() {
    let p: RetryPolicy =
        serde_json::from_value(json!({"retryable": ["SERVER", "PROVIDER_BUSY"]})).unwrap();
    assert_eq!(
        p.retryable,
        [
            FailureCode::Server,
            FailureCode::Other("PROVIDER_BUSY".into())
        ]
    );
    assert!(p.is_retryable(&FailureCode::from_wire("PROVIDER_BUSY")));
    assert!(!p.is_retryable(&FailureCode::Timeout));
    assert_eq!(
        serde_json::to_value(&p).unwrap()["retryable"],
        json!(["SERVER", "PROVIDER_BUSY"])
    );
    assert!(
        p.policy_key().contains(r#"["SERVER","PROVIDER_BUSY"]"#),
        "{}",
        p.policy_key()
    );
}

#[test]
fn config_validation_names_the_policy_by_variant() {
    use dsh_llm_retry::{ConfigError, LlmRetryConfig, PolicyError};
    let bad = RetryPolicy {
        jitter_ratio: -1.0,
        ..RetryPolicy::default()
    };
    let mut config = LlmRetryConfig::default();
    assert_eq!(config.validate(), Ok(()));
    config.providers.insert("deepseek".into(), bad.clone());
    let err = config.validate().unwrap_err();
    assert_eq!(
        err,
        ConfigError::Provider {
            name: "deepseek".into(),
            source: PolicyError::Jitter("-1".into())
        }
    );
    assert!(
        std::error::Error::source(&err).is_some(),
        "the cause is kept"
    );
    config.default = bad;
    assert!(matches!(
        config.validate(),
        Err(ConfigError::Default(PolicyError::Jitter(_)))
    ));
}
