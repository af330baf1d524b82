//! `cargo xtask joins [--cuts 6,12] [--tokens 64]`: how often a continued answer reads badly
//! at its join, on the real local model.
//!
//! For each of the 20 agreement prompts (`crates/local-onnx/model/agreement_prompts.txt`), the local
//! model (SmolLM2-135M under `$RIPCORD_CACHE`, greedy) answers once; its answer is cut after
//! `k` words for each `k` of `--cuts`. A chain with `stream_policy = continue` then gets a
//! first link that streams exactly those `k` words and breaks off (no finish event), and the
//! local model as the next link, which continues the answer the way the chain asks it:
//!
//! - `instruction`: the delivered text as an assistant turn, then the continue-from-here
//!   instruction (what a link without prefill gets — the local link is one);
//! - `prefill-shaped`: the delivered text as the final assistant turn and nothing after it
//!   (what a link with prefill gets). The local model's chat template closes that turn and
//!   opens a new one, so this row measures a vendor that takes the prefill request but does
//!   not continue it — the worst case of a wrong `assistant_prefill` claim.
//!
//! Each join is judged on the text the client would see, after the chain's own overlap check:
//!
//! - **repeated**: the continuation starts by repeating the delivered text's last word(s);
//! - **dropped**: it skips the greedy answer's next word and goes on with the one after;
//! - **broken**: a word is glued across the join (`blue` + `sky` → `bluesky`), or the join
//!   adds a space inside a word;
//! - **restart**: it begins the answer again (its first words are the answer's first words) or
//!   opens with a preamble (`Sure`, `Certainly`, `Here is`, …);
//! - **empty**: nothing was added;
//!
//! and **clean** otherwise; **as greedy** counts the clean joins whose first three words are
//! exactly the uncut greedy answer's. The figures are printed, never asserted: this is a
//! measurement, not a test.

use std::fmt;
use std::sync::Arc;

use futures::StreamExt;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error,
    ErrorKind, ModelId, Result, StreamEvent, StreamPolicy, async_trait,
};
use ripcord_local_onnx::LocalLlama;

/// The first link: streams the delivered text word by word, then breaks off.
#[derive(Debug)]
struct CutAfter {
    id: ModelId,
    caps: Capabilities,
    words: Vec<String>,
}

#[async_trait]
impl ChatModel for CutAfter {
    model_identity!(own);
    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        Err(Error::new(
            ErrorKind::InvalidRequest,
            "the cut link only streams",
        ))
    }
    async fn stream(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatStream> {
        let events: Vec<Result<StreamEvent>> = self
            .words
            .iter()
            .map(|w| Ok(StreamEvent::text(w.clone())))
            .collect();
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

/// The local model, claiming assistant prefill (so the chain sends it the prefill form).
#[derive(Debug)]
struct ClaimsPrefill {
    inner: Arc<LocalLlama>,
    caps: Capabilities,
}

#[async_trait]
impl ChatModel for ClaimsPrefill {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.inner.chat(req, ctx).await
    }
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.inner.stream(req, ctx).await
    }
}

/// How a join reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    Clean { as_greedy: bool },
    Repeated,
    Dropped,
    Broken,
    Restart,
    Empty,
}

/// Lowercased letters and digits of a word (punctuation dropped).
fn norm(w: &str) -> String {
    w.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(norm)
        .filter(|w| !w.is_empty())
        .collect()
}

const PREAMBLES: &[&str] = &[
    "sure",
    "certainly",
    "here is",
    "here's",
    "heres",
    "of course",
    "continuing",
    "as i was saying",
    "i'm sorry",
    "im sorry",
    "okay",
    "ok,",
];

/// Judges the join of `delivered` and `added`, against the uncut greedy answer `whole`.
fn judge(delivered: &str, added: &str, whole: &str) -> Join {
    let rest = whole.get(delivered.len()..).unwrap_or_default();
    let added_words = words(added);
    let Some(first) = added_words.first() else {
        return Join::Empty;
    };
    let lower = added.trim_start().to_lowercase();
    let opening = words(whole);
    if PREAMBLES.iter().any(|p| lower.starts_with(p))
        || (opening.len() >= 3 && added_words.len() >= 3 && added_words[..3] == opening[..3])
    {
        return Join::Restart;
    }
    let before = words(delivered);
    if before.last() == Some(first) {
        return Join::Repeated;
    }
    let glued =
        delivered.ends_with(char::is_alphanumeric) && added.starts_with(char::is_alphanumeric);
    let split = !delivered.ends_with(char::is_alphanumeric)
        && rest.starts_with(char::is_alphanumeric)
        && added.starts_with(char::is_whitespace);
    if glued || split {
        return Join::Broken;
    }
    let next = words(rest);
    if next.len() >= 2 && *first != next[0] && *first == next[1] {
        return Join::Dropped;
    }
    Join::Clean {
        as_greedy: next.len() >= 3 && added_words.len() >= 3 && added_words[..3] == next[..3],
    }
}

/// The counts of one row.
#[derive(Debug, Default)]
struct Row {
    joins: usize,
    clean: usize,
    as_greedy: usize,
    repeated: usize,
    dropped: usize,
    broken: usize,
    restart: usize,
    empty: usize,
    failed: usize,
    overlap_trimmed: usize,
}

impl Row {
    fn add(&mut self, j: Join) {
        self.joins += 1;
        match j {
            Join::Clean { as_greedy } => {
                self.clean += 1;
                self.as_greedy += usize::from(as_greedy);
            }
            Join::Repeated => self.repeated += 1,
            Join::Dropped => self.dropped += 1,
            Join::Broken => self.broken += 1,
            Join::Restart => self.restart += 1,
            Join::Empty => self.empty += 1,
        }
    }

    fn bad(&self) -> usize {
        self.joins - self.clean
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |n: usize| {
            if self.joins == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.joins as f64
            }
        };
        write!(
            f,
            "{:>5} {:>6} ({:>5.1}%) {:>6} ({:>5.1}%) {:>8} {:>7} {:>6} {:>7} {:>5} {:>9} {:>6}",
            self.joins,
            self.bad(),
            pct(self.bad()),
            self.clean,
            pct(self.clean),
            self.repeated,
            self.dropped,
            self.broken,
            self.restart,
            self.empty,
            self.as_greedy,
            self.overlap_trimmed,
        )
    }
}

struct Args {
    cuts: Vec<usize>,
    tokens: u32,
    show: bool,
}

fn parse(args: &[String]) -> std::result::Result<Args, String> {
    let mut a = Args {
        cuts: vec![6, 12],
        tokens: 64,
        show: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--cuts" => {
                let v = it.next().ok_or("--cuts needs a list, e.g. 6,12")?;
                a.cuts = v
                    .split(',')
                    .map(|s| s.trim().parse::<usize>())
                    .collect::<std::result::Result<_, _>>()
                    .map_err(|e| format!("--cuts {v:?}: {e}"))?;
                if a.cuts.contains(&0) {
                    return Err("--cuts: a cut after 0 words delivers nothing".to_owned());
                }
            }
            "--tokens" => {
                let v = it.next().ok_or("--tokens needs a number")?;
                a.tokens = v.parse().map_err(|e| format!("--tokens {v:?}: {e}"))?;
            }
            "--show" => a.show = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--cuts, --tokens, --show)"
                ));
            }
        }
    }
    Ok(a)
}

/// The delivered text: `whole` up to the end of its `k`-th word, and those words as the
/// pieces the cut link streams. `None` when the answer is too short to leave words after it.
fn cut(whole: &str, k: usize) -> Option<(String, Vec<String>)> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_word = false;
    for (i, c) in whole.char_indices() {
        let space = c.is_whitespace();
        if space && in_word {
            pieces.push(whole[start..i].to_owned());
            start = i;
            if pieces.len() == k {
                break;
            }
        }
        in_word = !space;
    }
    if pieces.len() < k || words(&whole[start..]).len() < 3 {
        return None;
    }
    Some((pieces.concat(), pieces))
}

async fn continued(
    first: CutAfter,
    next: Arc<dyn ChatModel>,
    prompt: &str,
    tokens: u32,
) -> Result<(String, u64)> {
    let chain = Chain::builder()
        .link_arc(Arc::new(first) as Arc<dyn ChatModel>)
        .link_arc(next)
        .stream_policy(StreamPolicy::Continue)
        .build()?;
    let req = ChatRequest::user(prompt).with_max_tokens(tokens);
    let ctx = Context::new().with_timeout(std::time::Duration::from_secs(120));
    let mut s = chain.stream(&req, &ctx).await?;
    let mut text = String::new();
    let mut trimmed = 0;
    while let Some(ev) = s.next().await {
        match ev? {
            StreamEvent::TextDelta { text: t } => text.push_str(&t),
            StreamEvent::Provenance { provenance } => {
                trimmed = provenance
                    .continuations
                    .iter()
                    .map(|c| c.overlap_trimmed)
                    .sum();
            }
            _ => {}
        }
    }
    Ok((text, trimmed))
}

async fn measure(a: Args) -> std::result::Result<(), String> {
    let dir = ripcord_local_onnx::default_model_dir();
    if !dir.join("model.onnx").is_file() {
        return Err(format!(
            "the local model is missing ({} has no model.onnx): run `cargo xtask setup-model` first",
            dir.display()
        ));
    }
    let local = Arc::new(
        LocalLlama::builder(&dir)
            .name("local")
            .temperature(0.0)
            .max_new_tokens(a.tokens)
            .build()
            .map_err(|e| e.to_string())?,
    );
    let prefill_caps = local.capabilities().clone().with_assistant_prefill(true);
    let forms: [(&str, Arc<dyn ChatModel>); 2] = [
        ("instruction", Arc::clone(&local) as Arc<dyn ChatModel>),
        (
            "prefill-shaped",
            Arc::new(ClaimsPrefill {
                inner: Arc::clone(&local),
                caps: prefill_caps,
            }),
        ),
    ];
    let prompts: Vec<&str> = ripcord_local_onnx::agreement::prompts().collect();
    let mut rows: Vec<(String, usize, Row)> = Vec::new();
    let mut short = 0usize;
    let started = std::time::Instant::now();
    let mut wholes = Vec::new();
    for p in &prompts {
        let req = ChatRequest::user(*p).with_max_tokens(a.tokens);
        let whole = local
            .chat(&req, &Context::new())
            .await
            .map_err(|e| format!("the local model could not answer {p:?}: {e}"))?
            .text()
            .to_owned();
        wholes.push(whole);
    }
    for &k in &a.cuts {
        for (form, next) in &forms {
            let mut row = Row::default();
            for (p, whole) in prompts.iter().zip(&wholes) {
                let Some((delivered, pieces)) = cut(whole, k) else {
                    short += 1;
                    continue;
                };
                let first = CutAfter {
                    id: ModelId::new("cut", "scripted"),
                    caps: Capabilities::new(8_192, 1_024),
                    words: pieces,
                };
                match continued(first, Arc::clone(next), p, a.tokens).await {
                    Ok((text, trimmed)) => {
                        let added = text.get(delivered.len()..).unwrap_or_default();
                        let j = judge(&delivered, added, whole);
                        row.overlap_trimmed += usize::from(trimmed > 0);
                        row.add(j);
                        if a.show {
                            println!(
                                "[{form} k={k} {j:?}] {delivered:?} + {:?}",
                                added.chars().take(60).collect::<String>()
                            );
                        }
                    }
                    Err(e) => {
                        row.failed += 1;
                        eprintln!("joins: {form} k={k} {p:?}: {e}");
                    }
                }
            }
            rows.push(((*form).to_owned(), k, row));
        }
    }
    println!(
        "continuation joins on the local model ({}, greedy, {} prompts, answers of at most {} tokens, {:.0} s)",
        dir.display(),
        prompts.len(),
        a.tokens,
        started.elapsed().as_secs_f64()
    );
    println!(
        "{:<15} {:>3} {:>5} {:>15} {:>15} {:>8} {:>7} {:>6} {:>7} {:>5} {:>9} {:>6}",
        "form",
        "cut",
        "joins",
        "reads badly",
        "clean",
        "repeated",
        "dropped",
        "broken",
        "restart",
        "empty",
        "as greedy",
        "trim'd"
    );
    for (form, k, row) in &rows {
        println!("{form:<15} {k:>3} {row}");
        if row.failed > 0 {
            println!("{:<15} {k:>3} ({} calls failed)", "", row.failed);
        }
    }
    if short > 0 {
        println!("({short} prompt/cut pairs skipped: the answer had too few words after the cut)");
    }
    Ok(())
}

/// Runs the measurement.
pub(crate) fn run(args: &[String]) -> std::result::Result<(), String> {
    let a = parse(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(measure(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_are_judged_on_the_text() {
        let whole = "The sky is blue because air scatters blue light more than red light.";
        let d = "The sky is blue because";
        assert_eq!(
            judge(d, " air scatters blue light", whole),
            Join::Clean { as_greedy: true }
        );
        assert_eq!(
            judge(d, " the air scatters it", whole),
            Join::Clean { as_greedy: false }
        );
        assert_eq!(judge(d, " because air scatters", whole), Join::Repeated);
        assert_eq!(judge(d, " scatters blue light", whole), Join::Dropped);
        assert_eq!(judge(d, "air scatters blue", whole), Join::Broken);
        assert_eq!(judge(d, " The sky is blue", whole), Join::Restart);
        assert_eq!(judge(d, " Sure! air scatters", whole), Join::Restart);
        assert_eq!(judge(d, " ", whole), Join::Empty);
    }

    #[test]
    fn a_cut_keeps_whole_words_and_leaves_some() {
        let (d, pieces) = cut("one two three four five six", 2).unwrap();
        assert_eq!(d, "one two");
        assert_eq!(pieces, ["one", " two"]);
        assert!(
            cut("one two three", 2).is_none(),
            "one word left is too few"
        );
    }
}
