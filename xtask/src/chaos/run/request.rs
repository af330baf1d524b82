//! One request of a virtual user, plain or streamed, and what it leaves in the records: the
//! answer's provenance, its attempts and skips, and (for streams) whether the text the user
//! saw is whole across a fallback.

use futures::StreamExt;
use ripcord_core::{ChatModel, ChatRequest, Context, Error, Provenance, StreamEvent};

use super::super::chain::Whole;
use super::super::observe::Recorder;
use super::super::record::{AttemptRec, ContinuedRec, Outcome, SkipRec};
use super::super::scenario::STATIC;

fn attempts(list: &[ripcord_core::Attempt]) -> Vec<AttemptRec> {
    list.iter()
        .map(|a| AttemptRec {
            provider: a.provider.to_string(),
            error_kind: a.error_kind,
            latency_ms: a.latency.as_secs_f64() * 1000.0,
        })
        .collect()
}

fn answered(p: &Provenance) -> Outcome {
    Outcome::Answered {
        served_by: match &p.served_by {
            Some(s) => s.to_string(),
            None if p.static_reply => STATIC.to_owned(),
            None => "unknown".to_owned(),
        },
        static_reply: p.static_reply,
    }
}

fn failed(e: &Error, before: &[AttemptRec]) -> (Outcome, Vec<AttemptRec>) {
    let mut list = before.to_vec();
    list.extend(attempts(e.attempts()));
    (Outcome::Failed { kind: e.kind() }, list)
}

fn skips(list: &[ripcord_core::Skip]) -> Vec<SkipRec> {
    list.iter()
        .map(|k| SkipRec {
            provider: k.provider.to_string(),
            reason: k.reason.as_str().to_owned(),
            prompt_tokens: k.prompt_tokens,
            window: k.window,
        })
        .collect()
}

/// One plain request.
pub(super) async fn chat_once(
    chain: &dyn ChatModel,
    req: &ChatRequest,
    ctx: &Context,
    rec: &Recorder,
    idx: usize,
) -> (Outcome, Vec<AttemptRec>) {
    match chain.chat(req, ctx).await {
        Ok(resp) => {
            rec.skipped(idx, skips(&resp.provenance.skipped));
            (
                answered(&resp.provenance),
                attempts(&resp.provenance.attempts),
            )
        }
        Err(e) => {
            rec.skipped(idx, skips(e.skipped()));
            failed(&e, &[])
        }
    }
}

/// A continued answer's join at byte `offset`: what is wrong when the latest provenance does not
/// record a continuation from `from` to `by` there.
fn join_problem(p: Option<&Provenance>, from: &str, by: &str, offset: usize) -> Option<String> {
    let recorded = p.is_some_and(|p| {
        p.continuations
            .iter()
            .any(|c| &*c.from == from && &*c.by == by && c.offset == offset as u64)
    });
    if !recorded {
        return Some(format!(
            "text from {from} then {by} at byte {offset} without a continuation record there"
        ));
    }
    None
}

/// Whether the text after `offset` starts by repeating the 16 bytes before it.
fn repeats_at(text: &str, offset: usize) -> bool {
    let tail = offset.saturating_sub(16);
    match (text.get(tail..offset), text.get(offset..)) {
        (Some(before), Some(after)) => {
            offset >= 16 && !before.trim().is_empty() && after.starts_with(before)
        }
        _ => false,
    }
}

/// What is wrong with a continued answer whose pieces all came from the fakes, against the
/// whole answer they give: text repeated or dropped around a join shows as a difference.
pub(super) fn differs_from_whole(
    text: &str,
    links: &[String],
    whole: Option<&Whole>,
) -> Option<String> {
    let w = whole?;
    if !links.iter().all(|l| w.links.contains(l)) || text == w.text {
        return None;
    }
    let same = text
        .bytes()
        .zip(w.text.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let around = |s: &str| {
        let from = s.floor_char_boundary(same.saturating_sub(12));
        let to = s.ceil_char_boundary((same + 12).min(s.len()));
        s.get(from..to).unwrap_or_default().to_owned()
    };
    Some(format!(
        "the continued answer differs from the whole answer at byte {same}: {:?} where the whole has {:?} ({} bytes against {})",
        around(text),
        around(&w.text),
        text.len(),
        w.text.len()
    ))
}

/// One streamed request, read to its end; its first content is logged at `idx`. With `whole`,
/// a continued answer made only by the fakes must be exactly the whole answer.
pub(super) async fn stream_once(
    chain: &dyn ChatModel,
    req: &ChatRequest,
    ctx: &Context,
    rec: &Recorder,
    idx: usize,
    whole: Option<&Whole>,
) -> (Outcome, Vec<AttemptRec>) {
    let mut stream = match chain.stream(req, ctx).await {
        Ok(s) => s,
        Err(e) => return failed(&e, &[]),
    };
    let mut provenance: Option<Provenance> = None;
    let mut finished = false;
    // The links whose content this answer carried (since the last `Restarted`): the link that
    // was producing it, by the latest provenance (the continuing link once one continues),
    // when each piece arrived; and the text so far.
    let mut texts_from: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut joins: Vec<usize> = Vec::new();
    let mut problem: Option<String> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(StreamEvent::Provenance { provenance: p }) => provenance = Some(*p),
            Ok(StreamEvent::Finish { .. }) => finished = true,
            Ok(StreamEvent::Restarted { .. }) => {
                finished = false;
                texts_from.clear();
                text.clear();
                joins.clear();
            }
            Ok(ev) if ev.is_content() => {
                rec.first_content(idx);
                let by = provenance
                    .as_ref()
                    .and_then(|p| p.continued_by.as_deref().or(p.served_by.as_deref()))
                    .unwrap_or("unknown")
                    .to_owned();
                if texts_from.last().is_some_and(|l| *l != by) {
                    let from = texts_from.last().cloned().unwrap_or_default();
                    let why = join_problem(provenance.as_ref(), &from, &by, text.len());
                    if why.is_some() {
                        rec.spliced(idx, format!("{from} then {by}"));
                    }
                    problem = problem.or(why);
                    joins.push(text.len());
                }
                if texts_from.last().is_none_or(|l| *l != by) {
                    texts_from.push(by);
                }
                if let StreamEvent::TextDelta { text: t } = &ev {
                    text.push_str(t);
                }
            }
            Ok(_) => {}
            Err(e) => {
                if texts_from.len() > 1 {
                    rec.continued(
                        idx,
                        ContinuedRec {
                            links: texts_from.clone(),
                            problem: problem.clone(),
                        },
                    );
                }
                let before = provenance
                    .as_ref()
                    .map_or_else(Vec::new, |p| attempts(&p.attempts));
                return failed(&e, &before);
            }
        }
    }
    if texts_from.len() > 1 {
        // Judged once the answer is whole: a join's continuation must not repeat what the
        // client already had.
        if let Some(&at) = joins.iter().find(|&&at| repeats_at(&text, at)) {
            problem = problem.or(Some(format!(
                "the continuation at byte {at} repeats the text before it"
            )));
        }
        if finished {
            problem = problem.or_else(|| differs_from_whole(&text, &texts_from, whole));
        }
        rec.continued(
            idx,
            ContinuedRec {
                links: texts_from,
                problem,
            },
        );
    }
    if let Some(p) = &provenance {
        rec.skipped(idx, skips(&p.skipped));
    }
    match (finished, provenance) {
        (true, Some(p)) => (answered(&p), attempts(&p.attempts)),
        (true, None) => (
            Outcome::Lost {
                why: "the stream finished without saying who served it".to_owned(),
            },
            Vec::new(),
        ),
        (false, p) => (
            Outcome::Lost {
                why: "the stream ended without its finish event or an error".to_owned(),
            },
            p.map_or_else(Vec::new, |p| attempts(&p.attempts)),
        ),
    }
}
