//! The detectors: what counts as personal data, and the checks that keep near-misses out.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;

use regex::Regex;

use super::Redaction;
use crate::error::ConfigError;

/// A kind of personal data the redactor masks.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PiiKind {
    /// An email address (`[EMAIL_n]`).
    Email,
    /// A phone number (`[PHONE_n]`): mainland China mobiles (`1[3-9]` + 9 digits, optionally
    /// written 3-4-4), landlines with an area code (`010-12345678`, `0755 1234 5678`), and
    /// international numbers written with `+` (E.164, 8 to 15 digits, e.g. `+86 138 1234 5678`,
    /// `+1 415 555 2671`).
    Phone,
    /// A PRC resident ID number (`[CN_ID_n]`): 18 characters, 17 digits and a digit or `X`,
    /// with a plausible birth month and day and a valid ISO 7064 MOD 11-2 check character.
    CnResidentId,
    /// A bank card number (`[BANK_CARD_n]`): 13 to 19 digits, spaces or dashes allowed
    /// between groups, passing the Luhn check.
    BankCard,
    /// An IPv4 address with valid octets, or an IPv6 address (`[IP_n]`).
    Ip,
    /// A user-supplied pattern, with its placeholder label.
    Custom(Arc<str>),
}

impl PiiKind {
    /// Every built-in kind.
    pub const BUILT_IN: [PiiKind; 5] = [
        PiiKind::Email,
        PiiKind::Phone,
        PiiKind::CnResidentId,
        PiiKind::BankCard,
        PiiKind::Ip,
    ];

    /// The placeholder label: `EMAIL`, `PHONE`, `CN_ID`, `BANK_CARD`, `IP`, or the custom
    /// label.
    pub fn label(&self) -> &str {
        match self {
            PiiKind::Email => "EMAIL",
            PiiKind::Phone => "PHONE",
            PiiKind::CnResidentId => "CN_ID",
            PiiKind::BankCard => "BANK_CARD",
            PiiKind::Ip => "IP",
            PiiKind::Custom(label) => label,
        }
    }
}

impl fmt::Display for PiiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

const EMAIL: &str = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}";
const IPV4: &str = r"\d{1,3}(?:\.\d{1,3}){3}";
const IPV6: &str = r"[0-9A-Fa-f:]*:[0-9A-Fa-f:]*(?:\.\d{1,3}){0,3}";
/// Digit groups joined by single spaces or dashes, an optional leading `+`, and an optional
/// trailing `X` (ID check character). Candidates are split and classified in code.
const NUMBER: &str = r"\+?\d+(?:[ \-]\d+)*[Xx]?";

/// Finds personal data in text and replaces it with placeholders.
///
/// Detection order, first claim wins: user patterns, emails, IPv6, IPv4, then digit runs
/// (classified as ID number, then phone, then bank card). Built-in matches must stand alone: a
/// number glued to letters, digits or a decimal point (`v2`, `1.2.3.4567`, `x13812345678`) is
/// not masked.
///
/// # Examples
///
/// ```
/// use ripcord_resilience::{Redaction, PiiRedactor};
/// let redactor = PiiRedactor::builder().build()?;
/// let mut found = Redaction::new();
/// let masked = redactor.redact("联系我：13812345678 或 li.lei@example.cn", &mut found);
/// assert_eq!(masked, "联系我：[PHONE_1] 或 [EMAIL_1]");
/// assert_eq!(found.restore(&masked), "联系我：13812345678 或 li.lei@example.cn");
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PiiRedactor {
    kinds: Vec<PiiKind>,
    email: Regex,
    ipv4: Regex,
    ipv6: Regex,
    number: Regex,
    custom: Vec<(PiiKind, Regex)>,
}

impl fmt::Debug for PiiRedactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PiiRedactor")
            .field("kinds", &self.kinds)
            .field(
                "custom",
                &self
                    .custom
                    .iter()
                    .map(|(k, _)| k.label())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Builds a [`PiiRedactor`]; patterns are compiled and checked in [`PiiRedactorBuilder::build`].
#[derive(Debug, Clone)]
pub struct PiiRedactorBuilder {
    kinds: Vec<PiiKind>,
    custom: Vec<(String, String)>,
}

impl PiiRedactor {
    /// A builder with every built-in kind and no custom patterns.
    pub fn builder() -> PiiRedactorBuilder {
        PiiRedactorBuilder {
            kinds: PiiKind::BUILT_IN.to_vec(),
            custom: Vec::new(),
        }
    }

    /// The built-in kinds this redactor looks for.
    pub fn kinds(&self) -> &[PiiKind] {
        &self.kinds
    }

    fn on(&self, kind: &PiiKind) -> bool {
        self.kinds.contains(kind)
    }

    /// The personal data in `text`: byte ranges and kinds, in text order, non-overlapping.
    pub fn find(&self, text: &str) -> Vec<(Range<usize>, PiiKind)> {
        let mut found: Vec<(Range<usize>, PiiKind)> = Vec::new();
        let free = |found: &[(Range<usize>, PiiKind)], r: &Range<usize>| {
            found
                .iter()
                .all(|(f, _)| f.end <= r.start || r.end <= f.start)
        };
        for (kind, re) in &self.custom {
            for m in re.find_iter(text) {
                if !m.range().is_empty() && free(&found, &m.range()) {
                    found.push((m.range(), kind.clone()));
                }
            }
        }
        if self.on(&PiiKind::Email) {
            for m in self.email.find_iter(text) {
                if free(&found, &m.range()) {
                    found.push((m.range(), PiiKind::Email));
                }
            }
        }
        if self.on(&PiiKind::Ip) {
            for m in self.ipv6.find_iter(text) {
                let r = m.range();
                let ok = m.as_str().matches(':').count() >= 2
                    && m.as_str().bytes().any(|b| b.is_ascii_hexdigit())
                    && Ipv6Addr::from_str(m.as_str()).is_ok()
                    && standalone(text, &r, b":");
                if ok && free(&found, &r) {
                    found.push((r, PiiKind::Ip));
                }
            }
            for m in self.ipv4.find_iter(text) {
                let r = m.range();
                if Ipv4Addr::from_str(m.as_str()).is_ok()
                    && standalone(text, &r, b".")
                    && free(&found, &r)
                {
                    found.push((r, PiiKind::Ip));
                }
            }
        }
        let numbers = [PiiKind::CnResidentId, PiiKind::Phone, PiiKind::BankCard];
        if numbers.iter().any(|k| self.on(k)) {
            for m in self.number.find_iter(text) {
                for (r, kind) in self.classify_run(text, m.range()) {
                    if free(&found, &r) {
                        found.push((r, kind));
                    }
                }
            }
        }
        found.sort_by_key(|(r, _)| r.start);
        found
    }

    /// Classifies a run of digit groups: the whole run if it is one value, else the longest
    /// runs of consecutive groups that are, left to right.
    fn classify_run(&self, text: &str, run: Range<usize>) -> Vec<(Range<usize>, PiiKind)> {
        // Byte ranges of the groups (a leading `+` belongs to the first group).
        let s = &text[run.clone()];
        let mut groups: Vec<Range<usize>> = Vec::new();
        let mut start = 0;
        for (i, c) in s.char_indices() {
            if c == ' ' || c == '-' {
                groups.push(run.start + start..run.start + i);
                start = i + 1;
            }
        }
        groups.push(run.start + start..run.end);
        let left_ok = standalone_left(text, run.start);
        let right_ok = standalone_right(text, run.end);
        let mut out = Vec::new();
        let mut i = 0;
        while i < groups.len() {
            let mut matched = None;
            for j in (i..groups.len()).rev() {
                if (i == 0 && !left_ok) || (j == groups.len() - 1 && !right_ok) {
                    continue;
                }
                let span = groups[i].start..groups[j].end;
                if let Some(kind) = self.classify(&text[span.clone()], &groups[i..=j], text) {
                    matched = Some((j, span, kind));
                    break;
                }
            }
            match matched {
                Some((j, span, kind)) => {
                    out.push((span, kind));
                    i = j + 1;
                }
                None => i += 1,
            }
        }
        out
    }

    fn classify(&self, s: &str, groups: &[Range<usize>], text: &str) -> Option<PiiKind> {
        let plus = s.starts_with('+');
        let check_x = s.ends_with(['X', 'x']);
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_digit)
            .map(|b| b - b'0')
            .collect();
        if self.on(&PiiKind::CnResidentId) && !plus && cn_resident_id(&digits, check_x) {
            return Some(PiiKind::CnResidentId);
        }
        if check_x {
            return None;
        }
        if self.on(&PiiKind::Phone) && phone(&digits, plus, groups, text) {
            return Some(PiiKind::Phone);
        }
        if self.on(&PiiKind::BankCard)
            && !plus
            && (13..=19).contains(&digits.len())
            && luhn(&digits)
        {
            return Some(PiiKind::BankCard);
        }
        None
    }

    /// Replaces the personal data in `text` with placeholders recorded in `redaction` (the
    /// same value gets the same placeholder). Returns the text unchanged when nothing matched.
    pub fn redact(&self, text: &str, redaction: &mut Redaction) -> String {
        let found = self.find(text);
        if found.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (r, kind) in found {
            out.push_str(&text[at..r.start]);
            out.push_str(&redaction.placeholder(&kind, &text[r.clone()]));
            at = r.end;
        }
        out.push_str(&text[at..]);
        out
    }
}

impl PiiRedactorBuilder {
    /// Looks only for these built-in kinds (custom patterns are added with
    /// [`PiiRedactorBuilder::custom`]). An empty list turns the built-in detectors off.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = PiiKind>) -> Self {
        self.kinds = kinds
            .into_iter()
            .filter(|k| !matches!(k, PiiKind::Custom(_)))
            .collect();
        self
    }

    /// Also masks every match of `pattern` (a `regex` crate pattern) as `[LABEL_n]`. `label`
    /// must be upper-case ASCII letters, digits and `_`, starting with a letter. User patterns
    /// claim text before the built-in detectors, in the order added.
    ///
    /// `\b` in a `regex` pattern is Unicode-aware: Chinese characters are word characters, so
    /// `\bEMP` does not match in `工号EMP-004217`; use the ASCII boundary `(?-u:\b)` instead.
    pub fn custom(mut self, label: impl Into<String>, pattern: impl Into<String>) -> Self {
        self.custom.push((label.into(), pattern.into()));
        self
    }

    /// Compiles the patterns.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] (policy `redact`) for a custom label that is not `[A-Z][A-Z0-9_]*` or
    /// clashes with a built-in label, or a pattern that does not compile or matches the empty
    /// string, naming the label.
    pub fn build(self) -> Result<PiiRedactor, ConfigError> {
        let compile = |setting: &'static str, p: &str| {
            Regex::new(p).map_err(|e| ConfigError::new("redact", setting, e.to_string()))
        };
        let mut custom = Vec::with_capacity(self.custom.len());
        for (label, pattern) in self.custom {
            let valid = label.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && label
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !valid {
                return Err(ConfigError::new(
                    "redact",
                    "custom",
                    format!("label {label:?} must match [A-Z][A-Z0-9_]*"),
                ));
            }
            if PiiKind::BUILT_IN.iter().any(|k| k.label() == label) {
                return Err(ConfigError::new(
                    "redact",
                    "custom",
                    format!("label {label:?} is a built-in label"),
                ));
            }
            let re = Regex::new(&pattern).map_err(|e| {
                ConfigError::new(
                    "redact",
                    "custom",
                    format!("pattern for label {label}: {e}"),
                )
            })?;
            if re.is_match("") {
                return Err(ConfigError::new(
                    "redact",
                    "custom",
                    format!("pattern for label {label} matches the empty string"),
                ));
            }
            custom.push((PiiKind::Custom(label.into()), re));
        }
        Ok(PiiRedactor {
            kinds: self.kinds,
            email: compile("email", EMAIL)?,
            ipv4: compile("ip", IPV4)?,
            ipv6: compile("ip", IPV6)?,
            number: compile("number", NUMBER)?,
            custom,
        })
    }
}

/// True when the match is not glued to a word, or to `joiners` next to a word character
/// (`1.2.3.4567`, `fe80::1:`): letters, digits and `_` on either side disqualify it.
fn standalone(text: &str, r: &Range<usize>, joiners: &[u8]) -> bool {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let before = r.start.checked_sub(1).map(|i| b[i]);
    let before2 = r.start.checked_sub(2).map(|i| b[i]);
    let after = b.get(r.end).copied();
    let after2 = b.get(r.end + 1).copied();
    let glued_left = match before {
        Some(c) if word(c) => true,
        Some(c) if joiners.contains(&c) => before2.is_some_and(word),
        _ => false,
    };
    let glued_right = match after {
        Some(c) if word(c) => true,
        Some(c) if joiners.contains(&c) => after2.is_some_and(word),
        _ => false,
    };
    !glued_left && !glued_right
}

fn standalone_left(text: &str, at: usize) -> bool {
    let b = text.as_bytes();
    match at.checked_sub(1).map(|i| b[i]) {
        Some(c) if c.is_ascii_alphanumeric() || c == b'_' => false,
        Some(b'.') => !at
            .checked_sub(2)
            .is_some_and(|i| b[i].is_ascii_alphanumeric()),
        _ => true,
    }
}

fn standalone_right(text: &str, at: usize) -> bool {
    let b = text.as_bytes();
    match b.get(at).copied() {
        Some(c) if c.is_ascii_alphanumeric() || c == b'_' => false,
        Some(b'.') => !b.get(at + 1).is_some_and(u8::is_ascii_digit),
        _ => true,
    }
}

/// ISO 7064 MOD 11-2 over the first 17 digits, plus a plausible birth month and day.
fn cn_resident_id(digits: &[u8], check_x: bool) -> bool {
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const CHECK: &[u8; 11] = b"10X98765432";
    let body_len = if check_x { 17 } else { 18 };
    if digits.len() != body_len || digits[0] == 0 {
        return false;
    }
    let month = digits[10] * 10 + digits[11];
    let day = digits[12] * 10 + digits[13];
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return false;
    }
    let sum: u32 = digits[..17]
        .iter()
        .zip(WEIGHTS)
        .map(|(&d, w)| u32::from(d) * w)
        .sum();
    let expected = CHECK[(sum % 11) as usize];
    let actual = if check_x { b'X' } else { b'0' + digits[17] };
    expected == actual
}

/// The Luhn check.
fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Mainland China mobiles and landlines, and `+`-prefixed international numbers.
fn phone(digits: &[u8], plus: bool, groups: &[Range<usize>], text: &str) -> bool {
    if plus {
        return (8..=15).contains(&digits.len()) && digits[0] != 0;
    }
    let mobile = digits.len() == 11 && digits[0] == 1 && (3..=9).contains(&digits[1]);
    if mobile {
        return true;
    }
    // A landline: an area code group `0xx` / `0xxx`, then 7 or 8 digits.
    if groups.len() < 2 {
        return false;
    }
    let area = &text[groups[0].clone()];
    let area_ok = (3..=4).contains(&area.len())
        && area.starts_with('0')
        && !area[1..].starts_with('0')
        && area.bytes().all(|b| b.is_ascii_digit());
    area_ok && (7..=8).contains(&(digits.len() - area.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(s: &str) -> Vec<u8> {
        s.bytes().map(|b| b - b'0').collect()
    }

    #[test]
    fn luhn_accepts_test_cards_and_rejects_a_changed_digit() {
        assert!(luhn(&digits("4111111111111111")));
        assert!(!luhn(&digits("4111111111111112")));
    }

    #[test]
    fn resident_id_check_character() {
        // The GB 11643 example number.
        assert!(cn_resident_id(&digits("11010519491231002"), true));
        assert!(!cn_resident_id(&digits("110105194912310021"), false));
    }
}
