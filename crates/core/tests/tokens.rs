//! The token estimate against a real tokenizer (OpenAI's cl100k_base, shipped in tiktoken-rs).

use ripcord_core::tokens::{
    ESTIMATE_LOWER_RATIO, ESTIMATE_UPPER_RATIO, estimate_request, estimate_text, lower_bound,
};
use ripcord_core::{ChatRequest, Message};

const ENGLISH: &str = "The sky appears blue because molecules in the atmosphere scatter shorter wavelengths of \
sunlight more strongly than longer ones. This effect, called Rayleigh scattering, is proportional to the inverse \
fourth power of the wavelength. At sunset, light travels through more air, so more blue is scattered away and the \
sun looks red or orange. Clouds look white because their droplets are large enough to scatter all colours about \
equally, which is known as Mie scattering. On Mars the sky is butterscotch by day and blue at sunset. ";

const CODE: &str = r#"fn main() {
    let mut total: u64 = 0;
    for (i, line) in std::io::stdin().lines().enumerate() {
        let line = line.expect("read");
        if let Ok(n) = line.trim().parse::<u64>() {
            total += n * (i as u64 + 1);
        }
    }
    println!("total = {total}");
}
"#;

const JSON: &str = r#"{"id":"chatcmpl-123","object":"chat.completion","created":1677652288,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how may I assist you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}"#;

const CHINESE: &str = "天空之所以呈现蓝色，是因为大气中的分子对阳光中波长较短的蓝光散射得更强。这种现象被称为瑞利散射，\
散射强度与波长的四次方成反比。日落时，阳光穿过更厚的大气层，更多的蓝光被散射掉，因此太阳看起来是红色或橙色的。";

#[test]
fn estimate_stays_within_the_documented_bound_of_cl100k() {
    let bpe = tiktoken_rs::cl100k_base().unwrap();
    for (name, text) in [
        ("english", ENGLISH.repeat(3)),
        ("code", CODE.repeat(3)),
        ("json", JSON.repeat(3)),
        ("chinese", CHINESE.repeat(3)),
        ("mixed", format!("{ENGLISH}{CHINESE}{CODE}")),
    ] {
        let truth = bpe.encode_ordinary(&text).len() as f64;
        let est = f64::from(estimate_text(&text));
        let ratio = est / truth;
        println!("{name}: estimate {est} vs cl100k {truth}: ratio {ratio:.3}");
        assert!(
            (ESTIMATE_LOWER_RATIO..=ESTIMATE_UPPER_RATIO).contains(&ratio),
            "{name}: estimate {est} vs cl100k {truth} (ratio {ratio:.3}) outside the documented bound"
        );
        // And the lower bound used for skipping never exceeds the true count.
        assert!(f64::from(lower_bound(est as u32)) <= truth, "{name}");
    }
}

#[test]
fn request_estimate_counts_every_message_with_overhead() {
    let one = estimate_request(&ChatRequest::user("hello"));
    let two = estimate_request(&ChatRequest::new(vec![
        Message::system("hello"),
        Message::user("hello"),
    ]));
    assert!(two > one);
    assert_eq!(
        two - one,
        estimate_text("hello") + ripcord_core::tokens::PER_MESSAGE_OVERHEAD
    );
    assert_eq!(estimate_text(""), 0);
    assert_eq!(estimate_text("   \t "), 0);
}

/// The estimate as first written, one `char` at a time: the byte-table version must agree
/// with it on every input.
fn reference_estimate(text: &str) -> u32 {
    #[derive(Clone, Copy, PartialEq)]
    enum Run {
        None,
        Word,
        Digits,
        Punct,
    }
    fn close(run: Run, len: u32) -> u32 {
        match run {
            Run::None => 0,
            Run::Word => 1 + len.saturating_sub(1) / 7,
            Run::Digits | Run::Punct => len.div_ceil(3),
        }
    }
    fn is_cjk(c: char) -> bool {
        matches!(c as u32,
            0x3000..=0x303F | 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
            | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF)
    }
    let (mut tokens, mut cjk_tenths, mut run, mut run_len) = (0u32, 0u32, Run::None, 0u32);
    for c in text.chars() {
        let kind = if c.is_ascii_alphabetic() {
            Run::Word
        } else if c.is_ascii_digit() {
            Run::Digits
        } else if c.is_ascii_punctuation() {
            Run::Punct
        } else {
            Run::None
        };
        if kind != run {
            tokens += close(run, run_len);
            run = kind;
            run_len = 0;
        }
        match kind {
            Run::None => {
                if is_cjk(c) {
                    cjk_tenths += 14;
                } else if !c.is_whitespace() || c == '\n' {
                    tokens += 1;
                }
            }
            _ => run_len += 1,
        }
    }
    tokens + close(run, run_len) + cjk_tenths / 10
}

#[test]
fn the_fast_path_agrees_with_the_reference_on_the_samples() {
    for text in [
        ENGLISH,
        CODE,
        JSON,
        CHINESE,
        "",
        "\u{1}\u{1c}\u{7f}\u{a0}\u{85} \t\r\n\u{b}\u{c}",
    ] {
        assert_eq!(estimate_text(text), reference_estimate(text), "{text:?}");
    }
}

proptest::proptest! {
    #[test]
    fn the_fast_path_agrees_with_the_reference(text in "\\PC*", ascii in "[ -~\t\n\r\u{0}-\u{1f}]{0,200}") {
        proptest::prop_assert_eq!(estimate_text(&text), reference_estimate(&text));
        proptest::prop_assert_eq!(estimate_text(&ascii), reference_estimate(&ascii));
    }
}
