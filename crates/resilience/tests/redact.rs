//! Redaction before cloud calls: detectors, near-misses, round trips, local links, streams.

// Test helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, ErrorKind,
    FinishReason, Locality, Message, ModelId, Result, StreamEvent, ToolCall, stream,
};
use ripcord_resilience::*;

/// Answers with the text of the last message it received (what the vendor saw), streamed in
/// pieces of `chunk` characters; records every request.
#[derive(Debug)]
struct Echo {
    id: ModelId,
    caps: Capabilities,
    chunk: usize,
    seen: Mutex<Vec<ChatRequest>>,
}

impl Echo {
    fn new(locality: Locality, chunk: usize) -> Self {
        Echo {
            id: ModelId::new("echo", "echo-1"),
            caps: Capabilities::new(8192, 512).with_locality(locality),
            chunk,
            seen: Mutex::new(Vec::new()),
        }
    }

    fn seen_text(&self) -> String {
        self.seen.lock().unwrap().last().unwrap().messages[0].text()
    }
}

#[async_trait]
impl ChatModel for Echo {
    fn id(&self) -> &ModelId {
        &self.id
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        self.seen.lock().unwrap().push(req.clone());
        let last = req.messages.last().unwrap();
        let calls = last.tool_calls.clone();
        Ok(ChatResponse::new(last.text()).with_tool_calls(calls))
    }
    async fn stream(&self, req: &ChatRequest, _ctx: &Context) -> Result<ChatStream> {
        self.seen.lock().unwrap().push(req.clone());
        let chars: Vec<char> = req.messages.last().unwrap().text().chars().collect();
        let mut events: Vec<Result<StreamEvent>> = chars
            .chunks(self.chunk)
            .map(|c| Ok(StreamEvent::text(c.iter().collect::<String>())))
            .collect();
        events.push(Ok(StreamEvent::finish(FinishReason::Stop)));
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

fn redactor() -> PiiRedactor {
    PiiRedactor::builder().build().unwrap()
}

fn masked(text: &str) -> String {
    redactor().redact(text, &mut Redaction::new())
}

/// The default redaction, restoring placeholders in answers or not.
fn redaction(restore: bool) -> RedactPolicy {
    RedactPolicy::builder().restore(restore).build().unwrap()
}

/// An [`Echo`] on `locality` streaming `chunk` characters at a time, and a link that masks
/// for it with [`redaction`]`(restore)`.
fn redacted(locality: Locality, chunk: usize, restore: bool) -> (Arc<Echo>, Redact<Arc<Echo>>) {
    let echo = Arc::new(Echo::new(locality, chunk));
    (echo.clone(), echo.with_redaction(redaction(restore)))
}

/// The answer of `link` to `text` on a fresh context.
async fn ask(link: &impl ChatModel, text: &str) -> ChatResponse {
    link.chat(&ChatRequest::user(text), &Context::new())
        .await
        .unwrap()
}

/// The stream `link` opens for `text` on a fresh context.
async fn open(link: &impl ChatModel, text: &str) -> ChatStream {
    link.stream(&ChatRequest::user(text), &Context::new())
        .await
        .unwrap()
}

const ZH: &str = "您好，我是王芳，手机13812345678，也可以打+86 139 1234 5678或座机010-12345678。\
身份证号110101199003074514，我先生的是11010519491231002X。\
工资卡6222 0212 3456 7890 128，邮箱wang.fang@example.com.cn，服务器192.168.1.10和2001:db8::8a2e:370:7334。";

#[test]
fn chinese_sample_is_fully_masked() {
    assert_eq!(
        masked(ZH),
        "您好，我是王芳，手机[PHONE_1]，也可以打[PHONE_2]或座机[PHONE_3]。\
身份证号[CN_ID_1]，我先生的是[CN_ID_2]。\
工资卡[BANK_CARD_1]，邮箱[EMAIL_1]，服务器[IP_1]和[IP_2]。"
    );
}

#[test]
fn english_sample_is_fully_masked() {
    let text = "Hi, I'm John Smith (john.smith+billing@example.co.uk). Call me on +1 415 555 2671 \
or +44 20 7946 0958. My Visa is 4111-1111-1111-1111 and my Mastercard 5200 8212 3456 7895. \
I log in from 203.0.113.7 or fe80::1ff:fe23:4567:890a.";
    assert_eq!(
        masked(text),
        "Hi, I'm John Smith ([EMAIL_1]). Call me on [PHONE_1] \
or [PHONE_2]. My Visa is [BANK_CARD_1] and my Mastercard [BANK_CARD_2]. \
I log in from [IP_1] or [IP_2]."
    );
}

#[test]
fn landlines_mobiles_and_separators() {
    assert_eq!(
        masked("深圳办公室0755 1234 5678，上海021-87654321，手机138-1234-5678"),
        "深圳办公室[PHONE_1]，上海[PHONE_2]，手机[PHONE_3]"
    );
    // Two numbers separated by a space are two values, not one run.
    assert_eq!(
        masked("备用 13812345678 13912345678"),
        "备用 [PHONE_1] [PHONE_2]"
    );
    assert_eq!(
        masked("电话13812345678 卡号6217001234567893"),
        "电话[PHONE_1] 卡号[BANK_CARD_1]"
    );
}

#[test]
fn near_misses_are_not_masked() {
    let r = redactor();
    for text in [
        // An 18-digit number whose ID check character is wrong (…4514 is valid).
        "身份证号110101199003074515",
        // 18 digits with a valid-looking layout but month 13.
        "编号110101199013074514",
        // A 16-digit number that fails Luhn (…7893 is valid).
        "卡号6217001234567894",
        "card 4111 1111 1111 1112",
        // Order numbers.
        "订单号：2024031512345678，请在7天内付款",
        "Order ORD-20240315-0001 shipped",
        "订单 202403151234567890 已发货",
        // Versions, dates, times, amounts.
        "升级到 1.2.3.4567 版本",
        "version v13812345678 and build 2.0.1",
        "日期 2024-03-15，时间 12:30:45，金额 ¥1,299.00",
        "Meeting on 2024/03/15 at 10:30",
        // Not an IPv4 address.
        "ping 999.1.1.1 failed",
        "mac 00:1a:2b:3c:4d:5e",
        // Digits glued to letters.
        "sku A13812345678B",
        // Too short for E.164.
        "extension +1 234",
        // Not an email.
        "user@localhost or @handle",
    ] {
        assert_eq!(r.find(text), vec![], "masked something in {text:?}");
    }
}

#[test]
fn the_same_value_gets_the_same_placeholder_and_restores() {
    let r = redactor();
    let mut map = Redaction::new();
    let a = r.redact("Mail li.lei@example.cn or han.meimei@example.cn.", &mut map);
    let b = r.redact("Again: li.lei@example.cn, 13812345678.", &mut map);
    assert_eq!(a, "Mail [EMAIL_1] or [EMAIL_2].");
    assert_eq!(b, "Again: [EMAIL_1], [PHONE_1].");
    assert_eq!(map.len(), 3);
    assert_eq!(map.value("[EMAIL_2]"), Some("han.meimei@example.cn"));
    assert_eq!(
        map.restore("[EMAIL_2] wrote to [EMAIL_1] ([PHONE_1]); [EMAIL_9] and [x] stay."),
        "han.meimei@example.cn wrote to li.lei@example.cn (13812345678); [EMAIL_9] and [x] stay."
    );
    // Debug never shows the values.
    let debug = format!("{map:?}");
    assert!(
        !debug.contains("li.lei") && debug.contains("masked: 3"),
        "{debug}"
    );

    // Whole-sample round trip.
    let mut map = Redaction::new();
    let out = r.redact(ZH, &mut map);
    assert_eq!(map.restore(&out), ZH);
    let counts = map.counts();
    assert_eq!(counts[&PiiKind::Phone], 3);
    assert_eq!(counts[&PiiKind::CnResidentId], 2);
}

#[test]
fn custom_patterns_claim_first_and_bad_ones_are_refused() {
    let r = PiiRedactor::builder()
        .custom("EMPLOYEE_ID", r"(?-u:\b)EMP-\d{6}(?-u:\b)")
        .custom("PLATE", r"[京沪粤][A-Z][A-Z0-9]{5}")
        .build()
        .unwrap();
    assert_eq!(
        r.redact(
            "工号EMP-004217，车牌沪A12345，电话13812345678",
            &mut Redaction::new()
        ),
        "工号[EMPLOYEE_ID_1]，车牌[PLATE_1]，电话[PHONE_1]"
    );
    // (label, pattern, what the refusal names)
    for (label, pattern, names) in [
        ("ID", r"(", "ID"),
        ("lower", r"x", "[A-Z]"),
        ("EMAIL", r"x", "built-in"),
        ("ANY", r"x*", "empty"),
    ] {
        let e = PiiRedactor::builder()
            .custom(label, pattern)
            .build()
            .unwrap_err();
        assert_eq!((e.policy(), e.setting()), ("redact", "custom"), "{label}");
        assert!(e.reason().contains(names), "{label}: {e}");
    }
}

#[test]
fn kinds_can_be_narrowed() {
    let r = PiiRedactor::builder()
        .kinds([PiiKind::Email])
        .build()
        .unwrap();
    assert_eq!(
        r.redact("a@b.cn 13812345678", &mut Redaction::new()),
        "[EMAIL_1] 13812345678"
    );
}

#[tokio::test]
async fn cloud_links_see_placeholders_and_callers_get_the_originals() {
    let (echo, link) = redacted(Locality::cloud("openai"), 4, true);
    let reply = ask(&link, ZH).await;
    assert!(!echo.seen_text().contains("13812345678"));
    assert!(echo.seen_text().contains("[PHONE_1]"));
    assert_eq!(reply.text(), ZH);

    // Without restoring, the caller sees what the vendor saw.
    let link = echo.clone().with_redaction(redaction(false));
    assert_eq!(ask(&link, ZH).await.text(), masked(ZH));
}

#[tokio::test]
async fn local_links_see_the_original_text() {
    let (echo, link) = redacted(Locality::Local, 4, false);
    let reply = ask(&link, ZH).await;
    assert_eq!(echo.seen_text(), ZH);
    assert_eq!(reply.text(), ZH);
}

#[tokio::test]
async fn every_message_and_tool_argument_is_masked_and_tool_calls_restored() {
    let (echo, link) = redacted(Locality::cloud_in("deepseek", "cn"), 4, true);
    let req = ChatRequest::new(vec![
        Message::system("The user's email is zhao.lei@example.com."),
        Message::user("Send my payslip to zhao.lei@example.com and text 13812345678."),
        Message::assistant_tool_calls(vec![ToolCall::new(
            "call_1",
            "send_email",
            r#"{"to":"zhao.lei@example.com","cc":"boss@example.com"}"#,
        )]),
    ]);
    let reply = link.chat(&req, &Context::new()).await.unwrap();
    let seen = echo.seen.lock().unwrap().last().unwrap().clone();
    assert_eq!(seen.messages[0].text(), "The user's email is [EMAIL_1].");
    assert_eq!(
        seen.messages[1].text(),
        "Send my payslip to [EMAIL_1] and text [PHONE_1]."
    );
    assert_eq!(
        seen.messages[2].tool_calls[0].arguments,
        r#"{"to":"[EMAIL_1]","cc":"[EMAIL_2]"}"#
    );
    assert_eq!(
        reply.tool_calls[0].arguments,
        r#"{"to":"zhao.lei@example.com","cc":"boss@example.com"}"#
    );
}

#[tokio::test]
async fn requests_without_personal_data_pass_unchanged() {
    let (echo, link) = redacted(Locality::cloud("openai"), 4, true);
    let text = "Why is the sky blue? Version 1.2.3.4567, order 2024031512345678.";
    let reply = ask(&link, text).await;
    assert_eq!(echo.seen_text(), text);
    assert_eq!(reply.text(), text);
}

#[tokio::test]
async fn streams_restore_placeholders_split_across_deltas() {
    for chunk in [1, 2, 3, 5, 7, 64] {
        let (echo, link) = redacted(Locality::cloud("openai"), chunk, true);
        let events: Vec<StreamEvent> = open(&link, ZH).await.map(|e| e.unwrap()).collect().await;
        let mut text = String::new();
        for ev in &events {
            if let StreamEvent::TextDelta { text: t } = ev {
                assert!(!t.is_empty());
                assert!(
                    !t.contains("[PHONE") && !t.contains("[CN_ID"),
                    "leaked {t:?}"
                );
                text.push_str(t);
            }
        }
        assert_eq!(text, ZH, "chunk {chunk}");
        assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })));
        assert!(echo.seen_text().contains("[EMAIL_1]"));
    }
}

#[tokio::test]
async fn a_stream_collects_to_the_restored_answer() {
    let (_, link) = redacted(Locality::cloud("openai"), 3, true);
    let s = open(&link, "写信给 li.lei@example.cn [注意] 结尾[").await;
    let reply = stream::collect(s).await.unwrap();
    assert_eq!(reply.text(), "写信给 li.lei@example.cn [注意] 结尾[");
}

#[test]
fn the_restorer_holds_back_only_possible_placeholders() {
    let mut map = Redaction::new();
    map.placeholder(&PiiKind::Email, "a@b.cn");
    map.placeholder(&PiiKind::BankCard, "4111111111111111");
    let mut r = Restorer::new(Arc::new(map));
    // `[` alone could start a placeholder: held.
    assert_eq!(r.push("see ["), "see ");
    // `[n` cannot: released at once.
    assert_eq!(r.push("note] and [B"), "[note] and ");
    assert_eq!(r.push("ANK_CARD_"), "");
    assert_eq!(r.push("1], [EMAIL_2"), "4111111111111111, [EMAIL_2");
    // `[EMAIL_1` is held until `]`, or released as-is when the text ends.
    assert_eq!(r.push(" [EMAIL_1"), " ");
    assert_eq!(r.flush(), "[EMAIL_1");
    assert_eq!(r.push("[EMAIL_1]"), "a@b.cn");
}

#[tokio::test]
async fn a_restarted_stream_drops_held_text() {
    #[derive(Debug)]
    struct Restarting(Capabilities, ModelId);
    #[async_trait]
    impl ChatModel for Restarting {
        fn id(&self) -> &ModelId {
            &self.1
        }
        fn capabilities(&self) -> &Capabilities {
            &self.0
        }
        async fn chat(&self, _r: &ChatRequest, _c: &Context) -> Result<ChatResponse> {
            Ok(ChatResponse::new("unused"))
        }
        async fn stream(&self, _r: &ChatRequest, _c: &Context) -> Result<ChatStream> {
            Ok(Box::pin(futures::stream::iter(vec![
                Ok(StreamEvent::text("Mail [EMA")),
                Ok(StreamEvent::Restarted {
                    reason: ErrorKind::ServerError,
                    message: "link failed".into(),
                }),
                Ok(StreamEvent::text("Mail [EMAIL_1].")),
                Ok(StreamEvent::finish(FinishReason::Stop)),
            ])))
        }
    }
    let link = Restarting(Capabilities::new(8192, 512), ModelId::new("r", "r-1"))
        .with_redaction(redaction(true));
    let events: Vec<StreamEvent> = open(&link, "to x.y@example.org")
        .await
        .map(|e| e.unwrap())
        .collect()
        .await;
    assert_eq!(events[0], StreamEvent::text("Mail "));
    assert!(matches!(events[1], StreamEvent::Restarted { .. }));
    assert_eq!(events[2], StreamEvent::text("Mail x.y@example.org."));
}

#[test]
fn more_formats() {
    assert_eq!(
        masked(
            "ID 110101 19900307 4514, call +1-415-555-2671, mapped ::ffff:192.0.2.1, loopback ::1."
        ),
        "ID [CN_ID_1], call [PHONE_1], mapped [IP_1], loopback [IP_2]."
    );
    // Lower-case check character, 19-digit UnionPay card, 13-digit card.
    assert_eq!(
        masked("11010519491231002x / 6222021234567890128 / 4222222222222"),
        "[CN_ID_1] / [BANK_CARD_1] / [BANK_CARD_2]"
    );
    // An IPv4 address at the end of a sentence, and one in a URL.
    assert_eq!(
        masked("Server 10.0.0.1. See http://172.16.254.1:8080/x"),
        "Server [IP_1]. See http://[IP_2]:8080/x"
    );
}

mod round_trip {
    use super::*;
    use proptest::prelude::*;

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("13812345678".to_owned()),
            Just("+86 139 1234 5678".to_owned()),
            Just("010-12345678".to_owned()),
            Just("110101199003074514".to_owned()),
            Just("11010519491231002X".to_owned()),
            Just("6222 0212 3456 7890 128".to_owned()),
            Just("li.lei@example.cn".to_owned()),
            Just("192.168.1.10".to_owned()),
            Just("2001:db8::1".to_owned()),
            Just("1.2.3.4567".to_owned()),
            Just("2024-03-15".to_owned()),
            "[a-zA-Z0-9 ,.:;@+\\-]{0,12}",
            "[你好电话邮箱，。]{0,6}",
        ]
    }

    proptest! {
        #[test]
        fn restore_gives_back_the_original(pieces in proptest::collection::vec(piece(), 0..12)) {
            let text = pieces.join(" ");
            let r = redactor();
            let mut map = Redaction::new();
            let out = r.redact(&text, &mut map);
            prop_assert_eq!(map.restore(&out), text.clone());
            // Streamed back in 3-byte-ish pieces, the restorer gives the same text.
            let map = Arc::new(map);
            let mut restorer = Restorer::new(map.clone());
            let mut streamed = String::new();
            let chars: Vec<char> = out.chars().collect();
            for c in chars.chunks(3) {
                streamed.push_str(&restorer.push(&c.iter().collect::<String>()));
            }
            streamed.push_str(&restorer.flush());
            prop_assert_eq!(streamed, text);
        }
    }
}
