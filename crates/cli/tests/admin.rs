//! The operator endpoints through the real `ripcord serve`: `[server.admin]` and its own key,
//! a breaker reset, disabling and enabling a provider, their own address, and a live reload
//! under load (`POST /admin/reload`): the new order in effect, a rotated key, the unchanged
//! provider's open breaker still open, and a bad config refused while serving continues.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod knobs_support;
mod support;

use std::time::Duration;

use knobs_support::*;
use ripcord_chaos::{Script, VendorError};
use serde_json::json;

/// `POST url path` with `auth` as the `authorization` header and an empty JSON body.
async fn admin_post(url: &str, path: &str, auth: &str) -> Answer {
    post(url, path, &[("authorization", auth)], json!({})).await
}

#[tokio::test]
async fn the_admin_key_resets_a_breaker_and_switches_a_provider_without_a_restart() {
    let primary = failing("from primary", VendorError::ServerError).await;
    let backup = fake("from backup", Script::default()).await;
    let dir = tempdir("admin");
    let text = format!(
        "[chain]\norder = [\"primary\", \"backup\"]\ndeadline_ms = 5000\nstatic_reply = \"busy\"\n{}\nfailure_threshold = 1\nopen_ms = 600000\n{}\n[server]\nexpose_errors = true\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n[server.admin]\nkey_env = \"ADMIN_KEY\"\n",
        provider("primary", "gpt-4o", &primary.base_url(), ""),
        provider("backup", "gpt-4o-mini", &backup.base_url(), ""),
    );
    let tenant = "Bearer acme-gateway-key-0123456789";
    let admin = "Bearer admin-key-0123456789abcdef";
    let served = support::serve_with_env(
        &write_config(&dir, &text),
        &[
            ("ACME_KEY", "acme-gateway-key-0123456789"),
            ("ADMIN_KEY", "admin-key-0123456789abcdef"),
        ],
    );
    let as_tenant = [("authorization", tenant)];
    assert_eq!(content(&ask(&served.url, &as_tenant).await), "from backup");
    // One server error opened the primary's breaker: the next call skips it.
    assert_eq!(content(&ask(&served.url, &as_tenant).await), "from backup");
    assert_eq!(chats(&primary), 1);
    let url = served.url.clone();
    let refused = admin_post(&url, "/admin/breakers/primary/reset", tenant).await;
    assert_eq!(
        refused.status, 401,
        "a tenant key opened the admin endpoint"
    );
    let reset = admin_post(&url, "/admin/breakers/primary/reset", admin).await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    assert_eq!(reset.body["was"], "open");
    primary.set_script(Script::default());
    assert_eq!(content(&ask(&served.url, &as_tenant).await), "from primary");
    assert_eq!(chats(&primary), 2);
    let off = admin_post(&url, "/admin/providers/primary/disable", admin).await;
    assert_eq!(off.status, 200, "{}", off.body);
    assert_eq!(off.body["was_enabled"], true);
    let a = ask(&served.url, &as_tenant).await;
    assert_eq!(content(&a), "from backup");
    assert!(
        header(&a, "x-ripcord-attempts").contains("primary/gpt-4o=circuit_open"),
        "{}",
        header(&a, "x-ripcord-attempts")
    );
    assert_eq!(chats(&primary), 2, "a disabled provider was called");
    let on = admin_post(&url, "/admin/providers/primary/enable", admin).await;
    assert_eq!(on.status, 200, "{}", on.body);
    assert_eq!(content(&ask(&served.url, &as_tenant).await), "from primary");
    let missing = admin_post(&url, "/admin/providers/nobody/disable", admin).await;
    assert_eq!(missing.status, 404);
    assert!(
        support::error_message(&missing.body).contains("primary"),
        "{}",
        missing.body
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn the_admin_endpoints_can_listen_on_an_address_of_their_own() {
    let primary = fake("from primary", Script::default()).await;
    let dir = tempdir("admin-listen");
    let text = format!(
        "[chain]\norder = [\"primary\"]\ndeadline_ms = 5000\n{}\n[server.admin]\nkey_env = \"ADMIN_KEY\"\nlisten = \"127.0.0.1:0\"\n",
        provider("primary", "gpt-4o", &primary.base_url(), ""),
    );
    let admin = "Bearer admin-key-0123456789abcdef";
    let served = support::serve_with_env(
        &write_config(&dir, &text),
        &[("ADMIN_KEY", "admin-key-0123456789abcdef")],
    );
    let admin_url = loop {
        let line = served
            .log
            .recv_timeout(Duration::from_secs(10))
            .expect("the admin listener's address");
        if let Some(rest) = line.strip_prefix("ripcord: admin endpoints on ") {
            break rest.trim_end_matches("/admin/").to_owned();
        }
    };
    let path = "/admin/providers/primary/disable";
    let on_gateway = post(&served.url, path, &[("authorization", admin)], json!({})).await;
    assert_eq!(on_gateway.status, 404, "{}", on_gateway.body);
    let own = post(&admin_url, path, &[("authorization", admin)], json!({})).await;
    assert_eq!(own.status, 200, "{}", own.body);
    let a = ask(&served.url, &[]).await;
    assert_eq!(chats(&primary), 0, "{}", a.body);
    let _ = std::fs::remove_dir_all(dir);
}

/// Three providers (`broken`, then `order`'s others) and two tenant keys; `globex_env` is the
/// variable the globex key is read from (a rotation points it elsewhere).
fn reload_config(urls: &[(&str, String)], order: &[&str], globex_env: &str) -> String {
    let mut text = format!(
        "[chain]\norder = [{}]\ndeadline_ms = 5000\n",
        order
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (name, url) in urls {
        let extra = if *name == "broken" {
            ""
        } else {
            "data_region = \"eu\""
        };
        text.push_str(&provider(name, "gpt-4o", url, extra));
        if *name == "broken" {
            text.push_str("failure_threshold = 1\nopen_ms = 600000\n");
        }
    }
    text.push_str(&format!(
        "\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n[[server.keys]]\ntenant = \"globex\"\nkey_env = \"{globex_env}\"\n[server.admin]\nkey_env = \"ADMIN_KEY\"\n"
    ));
    text
}

#[tokio::test]
async fn a_reload_under_load_swaps_the_order_and_a_key_and_keeps_an_open_breaker() {
    let broken = failing("never", VendorError::ServerError).await;
    let a = fake("from a", Script::default()).await;
    let b = fake("from b", Script::default()).await;
    let urls = [
        ("broken", broken.base_url()),
        ("a", a.base_url()),
        ("b", b.base_url()),
    ];
    let dir = tempdir("reload");
    let path = write_config(
        &dir,
        &reload_config(&urls, &["broken", "a", "b"], "GLOBEX_KEY"),
    );
    let acme = "Bearer acme-gateway-key-0123456789";
    let old_globex = "Bearer globex-gateway-key-old-0123";
    let new_globex = "Bearer globex-gateway-key-new-4567";
    let admin = "Bearer admin-key-0123456789abcdef";
    let served = support::serve_with_env(
        &path,
        &[
            ("ACME_KEY", "acme-gateway-key-0123456789"),
            ("GLOBEX_KEY", "globex-gateway-key-old-0123"),
            ("GLOBEX_KEY_NEW", "globex-gateway-key-new-4567"),
            ("ADMIN_KEY", "admin-key-0123456789abcdef"),
        ],
    );
    // The broken provider's breaker opens on its first failure and stays open for 10 minutes.
    let first = ask(&served.url, &[("authorization", acme)]).await;
    assert_eq!(content(&first), "from a");
    assert_eq!(chats(&broken), 1);
    let old = ask(&served.url, &[("authorization", old_globex)]).await;
    assert_eq!(old.status, 200, "{}", old.body);

    // 500 requests from 4 clients, across the reload.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let url = served.url.clone();
        let done = std::sync::Arc::clone(&done);
        clients.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for _ in 0..125 {
                let r = ask(&url, &[("authorization", acme)]).await;
                seen.push((r.status, header(&r, "x-ripcord-served-by").to_owned()));
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            seen
        }));
    }
    while done.load(std::sync::atomic::Ordering::SeqCst) < 100 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    write_config(
        &dir,
        &reload_config(&urls, &["broken", "b", "a"], "GLOBEX_KEY_NEW"),
    );
    let reload = admin_post(&served.url, "/admin/reload", admin).await;
    assert_eq!(reload.status, 200, "{}", reload.body);
    let summary = reload.body["summary"].as_str().unwrap();
    assert!(
        summary.contains("kept with their state: a, b, broken"),
        "{summary}"
    );
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    assert_eq!(all.len(), 500);
    let failed: Vec<_> = all.iter().filter(|(s, _)| *s != 200).collect();
    assert!(failed.is_empty(), "failed across the reload: {failed:?}");
    // The new order is in effect, and the kept breaker is still open: `broken` saw nothing.
    let after = ask(&served.url, &[("authorization", acme)]).await;
    assert_eq!(content(&after), "from b");
    assert!(all.iter().any(|(_, by)| by == "a") && all.iter().any(|(_, by)| by == "b"));
    assert_eq!(
        chats(&broken),
        1,
        "the open breaker was forgotten by the reload"
    );
    let readyz: serde_json::Value = reqwest::get(format!("{}/readyz", served.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let broken_link = readyz["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["link"] == "broken")
        .unwrap();
    assert_eq!(broken_link["breaker"]["state"], "open", "{readyz}");
    // The rotated key: the old secret is refused, the new one accepted.
    let old = ask(&served.url, &[("authorization", old_globex)]).await;
    assert_eq!(old.status, 401, "{}", old.body);
    let new = ask(&served.url, &[("authorization", new_globex)]).await;
    assert_eq!(new.status, 200, "{}", new.body);

    // A bad config is refused with its file, line and key; the running one keeps serving.
    std::fs::write(&path, "[chain]\norder = [\"b\"]\nbogus = 1\n").unwrap();
    let refused = admin_post(&served.url, "/admin/reload", admin).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let why = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("{}:3", path.display())) && why.contains("bogus"),
        "{why}"
    );
    let still = ask(&served.url, &[("authorization", acme)]).await;
    assert_eq!(content(&still), "from b");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn sighup_reloads_the_config_and_a_bad_one_is_refused() {
    let a = fake("from a", Script::default()).await;
    let b = fake("from b", Script::default()).await;
    let dir = tempdir("sighup");
    let chain = |order: &str| {
        format!(
            "[chain]\norder = [{order}]\ndeadline_ms = 5000\n{}{}",
            provider("a", "gpt-4o", &a.base_url(), ""),
            provider("b", "gpt-4o", &b.base_url(), "")
        )
    };
    let path = write_config(&dir, &chain("\"a\", \"b\""));
    let served = support::serve(&path);
    assert_eq!(content(&ask(&served.url, &[]).await), "from a");
    // The reload's outcome is logged; wait for that line, not for time to pass.
    let outcome = |served: &support::Served| loop {
        let line = served
            .log
            .recv_timeout(Duration::from_secs(10))
            .expect("a reload line in the log");
        if line.starts_with("ripcord: reload") {
            break line;
        }
    };
    write_config(&dir, &chain("\"b\", \"a\""));
    served.signal("HUP");
    let line = outcome(&served);
    assert!(line.starts_with("ripcord: reloaded"), "{line}");
    assert_eq!(content(&ask(&served.url, &[]).await), "from b");
    std::fs::write(
        &path,
        "[chain]\norder = [\"a\"]\n[[providers]]\nname = \"a\"\nkind = \"gpt\"\n",
    )
    .unwrap();
    served.signal("HUP");
    let line = outcome(&served);
    assert!(
        line.starts_with("ripcord: reload refused") && line.contains("key `kind`"),
        "{line}"
    );
    assert_eq!(content(&ask(&served.url, &[]).await), "from b");
    let _ = std::fs::remove_dir_all(dir);
}
