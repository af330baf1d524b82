//! `ripcord probe-formats`: runs the user's own output-format checks against every link of the
//! chain, one by one, so a team learns before an outage that its third fallback wraps JSON in
//! prose.
//!
//! A case is a TOML file in the cases folder:
//!
//! ```toml
//! name = "order as JSON"            # optional; default: the file name
//! system = "Answer with JSON only." # optional
//! prompt = "Give order 42 as {\"id\": number, \"status\": string}."
//! response_format = "json"          # optional: "text" (default), "json" or "json_schema"
//! max_tokens = 200                  # optional
//! [expect]                          # exactly one of:
//! json_schema = { type = "object", required = ["id", "status"] }
//! # json = true                     # any valid JSON
//! # regex = '^\d{4}-\d{2}-\d{2}$'   # the whole answer (trimmed) must match
//! ```
//!
//! Each link is called directly (with its own retry and breaker, but without falling back), so
//! the table shows what *that* model does with the case.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ripcord_core::{ChatModel, ChatRequest, Context, Message, ResponseFormat};
use ripcord_resilience::{JsonValidator, Validator};
use serde::Deserialize;
use toml::Spanned;

use crate::config::ConfigError;

/// What an answer must look like.
#[derive(Debug, Clone)]
pub enum Check {
    /// Valid JSON matching this schema (the structural subset `ripcord-resilience` checks).
    JsonSchema(serde_json::Value),
    /// Any valid JSON.
    Json,
    /// The trimmed answer matches this regex entirely.
    Regex(regex::Regex),
}

/// One case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Its name.
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// The request sent to every link.
    pub request: ChatRequest,
    /// The check.
    pub check: Check,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: Option<String>,
    system: Option<String>,
    prompt: String,
    response_format: Option<Spanned<String>>,
    max_tokens: Option<u32>,
    expect: Spanned<RawExpect>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    json_schema: Option<toml::Value>,
    json: Option<bool>,
    regex: Option<Spanned<String>>,
}

fn err(
    file: &Path,
    text: &str,
    span: Option<std::ops::Range<usize>>,
    key: &str,
    message: impl Into<String>,
) -> ConfigError {
    let file = file.display().to_string();
    ConfigError::at(&file, text, span.as_ref(), Some(key.to_owned()), message)
}

/// Parses one case file's text.
///
/// # Errors
///
/// A [`ConfigError`] naming the file, line and key.
pub fn parse_case(file: &Path, text: &str) -> Result<Case, ConfigError> {
    let raw: RawCase = toml::from_str(text)
        .map_err(|e| ConfigError::toml(&file.display().to_string(), text, &e))?;
    let expect_span = raw.expect.span();
    let expect = raw.expect.into_inner();
    let check = match (expect.json_schema, expect.json, expect.regex) {
        (Some(schema), None, None) => {
            let v = serde_json::to_value(&schema).map_err(|e| {
                err(
                    file,
                    text,
                    Some(expect_span.clone()),
                    "expect.json_schema",
                    e.to_string(),
                )
            })?;
            Check::JsonSchema(v)
        }
        (None, Some(true), None) => Check::Json,
        (None, None, Some(r)) => {
            let anchored = format!("^(?:{})$", r.get_ref());
            Check::Regex(regex::Regex::new(&anchored).map_err(|e| {
                err(
                    file,
                    text,
                    Some(r.span()),
                    "expect.regex",
                    format!("invalid regex: {e}"),
                )
            })?)
        }
        _ => {
            return Err(err(
                file,
                text,
                Some(expect_span),
                "expect",
                "give exactly one of `json_schema`, `json = true` or `regex`",
            ));
        }
    };
    let mut messages = Vec::new();
    if let Some(s) = raw.system {
        messages.push(Message::system(s));
    }
    messages.push(Message::user(raw.prompt));
    let mut request = ChatRequest::new(messages);
    request.max_tokens = raw.max_tokens;
    request.response_format = match raw
        .response_format
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("text", _)) => ResponseFormat::Text,
        Some(("json", _)) => ResponseFormat::Json,
        Some(("json_schema", span)) => match &check {
            Check::JsonSchema(schema) => ResponseFormat::JsonSchema {
                name: "probe".to_owned(),
                schema: schema.clone(),
                strict: false,
            },
            _ => {
                return Err(err(
                    file,
                    text,
                    Some(span),
                    "response_format",
                    "\"json_schema\" needs `expect.json_schema`",
                ));
            }
        },
        Some((other, span)) => {
            return Err(err(
                file,
                text,
                Some(span),
                "response_format",
                format!("expected \"text\", \"json\" or \"json_schema\", got {other:?}"),
            ));
        }
    };
    let name = raw.name.unwrap_or_else(|| {
        file.file_stem()
            .map_or_else(|| "case".to_owned(), |s| s.to_string_lossy().into_owned())
    });
    Ok(Case {
        name,
        file: file.to_owned(),
        request,
        check,
    })
}

/// Loads every `*.toml` case in a folder, sorted by file name.
///
/// # Errors
///
/// An unreadable folder or file, no cases, or a [`ConfigError`] in a case.
pub fn load_cases(dir: &Path) -> Result<Vec<Case>, ConfigError> {
    let io = |e: std::io::Error| ConfigError {
        file: dir.display().to_string(),
        line: None,
        key: None,
        message: format!("cannot read the cases folder: {e}"),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(ConfigError {
            file: dir.display().to_string(),
            line: None,
            key: None,
            message: "no *.toml cases in this folder".to_owned(),
        });
    }
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| ConfigError {
                file: f.display().to_string(),
                line: None,
                key: None,
                message: format!("cannot read: {e}"),
            })?;
            parse_case(f, &text)
        })
        .collect()
}

/// How one link did on one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The answer has the format.
    Pass,
    /// The answer does not have the format (why).
    Fail(String),
    /// The link did not answer (the error kind and message).
    Error(String),
}

/// One cell of the table.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case.
    pub case: String,
    /// The link.
    pub link: String,
    /// The verdict.
    pub verdict: Verdict,
    /// How long the link took.
    pub latency: Duration,
}

fn check(case: &Case, answer: &ripcord_core::ChatResponse) -> Verdict {
    let result = match &case.check {
        Check::Regex(re) => {
            if re.is_match(answer.content.trim()) {
                Ok(())
            } else {
                Err(format!("the answer does not match /{}/", re.as_str()))
            }
        }
        Check::Json => JsonValidator.validate(
            &case
                .request
                .clone()
                .with_response_format(ResponseFormat::Json),
            answer,
        ),
        Check::JsonSchema(schema) => {
            let req = case
                .request
                .clone()
                .with_response_format(ResponseFormat::JsonSchema {
                    name: case.name.clone(),
                    schema: schema.clone(),
                    strict: false,
                });
            JsonValidator.validate(&req, answer)
        }
    };
    match result {
        Ok(()) => Verdict::Pass,
        Err(why) => Verdict::Fail(why),
    }
}

/// Runs every case against every link, in order.
pub async fn run(links: &[Arc<dyn ChatModel>], cases: &[Case], timeout: Duration) -> Vec<Outcome> {
    let mut out = Vec::with_capacity(links.len() * cases.len());
    for case in cases {
        for link in links {
            let started = Instant::now();
            let ctx = Context::new().with_timeout(timeout);
            let verdict = match link.chat(&case.request, &ctx).await {
                Ok(answer) => check(case, &answer),
                Err(e) => Verdict::Error(format!("{}: {}", e.kind(), e.message())),
            };
            out.push(Outcome {
                case: case.name.clone(),
                link: link.id().name.to_string(),
                verdict,
                latency: started.elapsed(),
            });
        }
    }
    out
}

/// The table: one row per case × link.
pub fn table(outcomes: &[Outcome]) -> String {
    // A column's width: its longest entry, at least 4.
    let width = |of: fn(&Outcome) -> &str| {
        outcomes
            .iter()
            .map(|o| of(o).chars().count())
            .fold(4, usize::max)
    };
    let cw = width(|o| &o.case);
    let lw = width(|o| &o.link);
    let mut s = format!(
        "{:<cw$}  {:<lw$}  {:<6}  {:>8}  detail\n",
        "case", "link", "result", "latency"
    );
    for o in outcomes {
        let (result, detail) = match &o.verdict {
            Verdict::Pass => ("PASS", String::new()),
            Verdict::Fail(why) => ("FAIL", why.clone()),
            Verdict::Error(e) => ("ERROR", e.clone()),
        };
        s.push_str(&format!(
            "{:<cw$}  {:<lw$}  {:<6}  {:>6}ms  {}\n",
            o.case,
            o.link,
            result,
            o.latency.as_millis(),
            detail
        ));
    }
    let kept = outcomes
        .iter()
        .filter(|o| o.verdict == Verdict::Pass)
        .count();
    s.push_str(&format!(
        "{kept}/{} case×link checks keep the format\n",
        outcomes.len()
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Case, ConfigError> {
        parse_case(Path::new("cases/x.toml"), text)
    }

    #[test]
    fn cases_parse_with_each_kind_of_check() {
        let c = parse("prompt = \"p\"\n[expect]\nregex = '\\d+'\n").unwrap();
        assert!(matches!(c.check, Check::Regex(_)));
        assert_eq!(c.name, "x");
        let c = parse("prompt = \"p\"\nresponse_format = \"json_schema\"\n[expect]\njson_schema = { type = \"object\" }\n").unwrap();
        assert!(matches!(
            c.request.response_format,
            ResponseFormat::JsonSchema { .. }
        ));
        let c = parse("prompt = \"p\"\n[expect]\njson = true\n").unwrap();
        assert!(matches!(c.check, Check::Json));
    }

    #[test]
    fn case_mistakes_name_file_line_and_key() {
        let e = parse("prompt = \"p\"\n[expect]\nregex = '('\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("expect.regex")));
        assert!(
            e.to_string()
                .starts_with("cases/x.toml:3: key `expect.regex`: invalid regex"),
            "{e}"
        );
        let e = parse("prompt = \"p\"\n[expect]\njson = true\nregex = 'x'\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("expect"));
        let e = parse("prompt = \"p\"\nresponse_format = \"yaml\"\n[expect]\njson = true\n")
            .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("response_format"))
        );
        let e = parse("[expect]\njson = true\n").unwrap_err();
        assert!(e.message.contains("missing field `prompt`"), "{e}");
    }

    #[test]
    fn regex_checks_the_whole_trimmed_answer() {
        let c = parse("prompt = \"p\"\n[expect]\nregex = '\\d{4}-\\d{2}-\\d{2}'\n").unwrap();
        assert_eq!(
            check(&c, &ripcord_core::ChatResponse::new(" 2026-11-29\n")),
            Verdict::Pass
        );
        assert!(matches!(
            check(&c, &ripcord_core::ChatResponse::new("It is 2026-11-29.")),
            Verdict::Fail(_)
        ));
    }
}
