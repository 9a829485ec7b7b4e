//! `Op::SetWorkingDirectory`: the session moves, the change is logged once as
//! `working-directory/change`, the model is told, and bad directories are refused.

use dsh_approval::ApprovalPolicy;
use dsh_protocol::{ErrorCode, EventMsg, Op};
use dsh_test_harness::{Script, text, within};
use futures::StreamExt;
use serde_json::Value;

use crate::compose::{host, open};

fn set(path: &str) -> Op {
    Op::SetWorkingDirectory { path: path.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_change_moves_the_session_logs_once_and_tells_the_model() {
    let (h, _host, client) = host(vec![Script::Chunks(text("ok"))], ApprovalPolicy::Never).await;
    let id = open(&client, &h).await;
    std::fs::create_dir_all(h.dir().join("sub")).unwrap();
    let sub = h.dir().join("sub").canonicalize().unwrap();
    let sub_text = sub.display().to_string();

    let accepted = client.send(&id, set("sub")).await.unwrap();
    assert_eq!(accepted.id.as_deref(), Some(sub_text.as_str()));
    assert_eq!(client.session(&id).await.unwrap().cwd, sub_text);
    // The same directory again (absolute this time) changes nothing.
    let again = client.send(&id, set(&sub_text)).await.unwrap();
    assert_eq!(again.id.as_deref(), Some(sub_text.as_str()));
    // Missing directories and files are refused; the session stays where it is.
    std::fs::write(sub.join("f"), "x").unwrap();
    for bad in ["", "missing", "f"] {
        let e = client.send(&id, set(bad)).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidRequest, "{bad}: {e:?}");
    }
    assert_eq!(client.session(&id).await.unwrap().cwd, sub_text);

    // The next turn's model request carries the notice.
    let mut events = client.subscribe(&id, None).await.unwrap();
    client
        .send(
            &id,
            Op::Submit {
                text: "hi".into(),
                attachments: vec![],
            },
        )
        .await
        .unwrap();
    loop {
        let ev = within("turn end", events.next()).await.unwrap();
        if matches!(ev.msg, EventMsg::TurnEnded { .. }) {
            break;
        }
    }
    client.close(&id).await.unwrap();
    let mut log = client.log(&id, None).await.unwrap();
    let mut rows = Vec::new();
    while let Some(r) = within("the log", log.next()).await {
        rows.push(serde_json::from_str::<Value>(&r.unwrap().line).unwrap());
    }
    let changes: Vec<&Value> = rows
        .iter()
        .filter(|r| r["type"] == "working-directory/change")
        .collect();
    assert_eq!(changes.len(), 1, "{rows:#?}");
    assert_eq!(changes[0]["data"], serde_json::json!({"cwd": sub_text}));
    let notice = format!("The working directory is now {sub_text}.");
    assert!(
        rows.iter().any(|r| r.to_string().contains(&notice)),
        "{rows:#?}"
    );
}
