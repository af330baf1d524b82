//! The bare proxy: what forwarding a request costs on this machine with nothing of ripcord in
//! it, as a reference for the gateway's cost per request.
//!
//! The child (`ripcord-bench --role proxy --upstream-url URL`) runs hyper's HTTP/1 server and
//! hyper-util's pooled client (the same crates the gateway is built on, on a default
//! multi-threaded runtime as `ripcord serve` uses) and does only what any forwarder must:
//! read the request body, send it to the upstream's chat endpoint with the request's
//! `authorization` and `content-type`, read the answer's body and send it back with its
//! status. No routing, chain, policies, JSON, spans, metrics or log. It prints its base URL as
//! one line and serves until its standard input closes, like the upstream child. It runs on
//! the system allocator (the bench binary's), while `ripcord` runs on mimalloc: forwarding
//! allocates little, and the bench's in-process rows are not moved by a different allocator.

use std::convert::Infallible;
use std::io::Write;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::upstream::{RoleChild, until_stdin_closes};

/// The running bare proxy child; dropping it stops the child.
#[derive(Debug)]
pub(crate) struct BareProxy {
    child: RoleChild,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl BareProxy {
    /// Starts the child in front of `upstream` (a base URL) and waits for its URL.
    pub(crate) fn spawn(upstream: &str) -> Result<BareProxy, String> {
        let (child, line) = RoleChild::spawn(
            "bare proxy",
            &["--role", "proxy", "--upstream-url", upstream],
        )?;
        let url = line.trim().to_owned();
        if !url.starts_with("http://127.0.0.1:") {
            return Err(format!(
                "bare proxy: the child printed {line:?} instead of its URL"
            ));
        }
        Ok(BareProxy { child, url })
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.pid()
    }
}

type Upstream = Client<HttpConnector, Full<Bytes>>;

/// One request: body in, forwarded, answer back.
async fn forward(
    client: Upstream,
    target: http::Uri,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let fail = |why: String| {
        let mut r = Response::new(Full::new(Bytes::from(why)));
        *r.status_mut() = StatusCode::BAD_GATEWAY;
        Ok(r)
    };
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return fail(format!("reading the request body: {e}")),
    };
    let mut out = Request::post(target);
    for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
        if let Some(v) = parts.headers.get(&name) {
            out = out.header(name, v.clone());
        }
    }
    let out = match out.body(Full::new(body)) {
        Ok(r) => r,
        Err(e) => return fail(format!("building the upstream request: {e}")),
    };
    let answer = match client.request(out).await {
        Ok(a) => a,
        Err(e) => return fail(format!("upstream: {e}")),
    };
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let body = match answer.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return fail(format!("reading the upstream body: {e}")),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        content_type.unwrap_or(HeaderValue::from_static("application/json")),
    );
    Ok(r)
}

/// The child's main: serve until stdin closes.
pub(crate) fn child_main(upstream: &str) -> Result<(), String> {
    let target: http::Uri = format!("{}/v1/chat/completions", upstream.trim_end_matches('/'))
        .parse()
        .map_err(|e| format!("bare proxy: --upstream-url {upstream:?}: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("bare proxy: runtime: {e}"))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bare proxy: bind: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("bare proxy: address: {e}"))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);
        let mut out = std::io::stdout().lock();
        writeln!(out, "http://{addr}").map_err(|e| format!("bare proxy: stdout: {e}"))?;
        out.flush()
            .map_err(|e| format!("bare proxy: stdout: {e}"))?;
        drop(out);
        let serve = async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let client = client.clone();
                let target = target.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        forward(client.clone(), target.clone(), req)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        };
        tokio::select! {
            () = serve => {}
            () = until_stdin_closes() => {}
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_proxy_forwards_body_status_and_key_to_the_upstream() {
        // A second bench child would need this test binary to act as one; run the child's
        // server in-process instead, in front of a recording fake vendor.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let fake = ripcord_chaos::FakeVendor::start_with(
                ripcord_chaos::Wire::OpenAi,
                ripcord_chaos::FakeOptions::default(),
            )
            .await
            .unwrap();
            let target: http::Uri = format!("{}/v1/chat/completions", fake.base_url())
                .parse()
                .unwrap();
            let client: Upstream =
                Client::builder(TokioExecutor::new()).build(HttpConnector::new());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let service = hyper::service::service_fn(move |req| {
                    forward(client.clone(), target.clone(), req)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
            let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
            let resp = reqwest::Client::new()
                .post(format!("http://{addr}/v1/chat/completions"))
                .header("authorization", "Bearer sk-bench")
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            let answer: serde_json::Value = resp.json().await.unwrap();
            assert!(
                answer["choices"][0]["message"]["content"].is_string(),
                "{answer}"
            );
            let sent = fake.requests();
            assert_eq!(sent.len(), 1);
            assert_eq!(sent[0].body, body.as_bytes());
            assert!(
                sent[0]
                    .headers
                    .iter()
                    .any(|(n, v)| n.eq_ignore_ascii_case("authorization") && v == "Bearer sk-bench")
            );
        });
    }
}
