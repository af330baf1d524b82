//! Environment lookups, `${VAR}` interpolation, and errors located at a file's line and key.

use std::ops::Range;

use toml::Spanned;

use super::ConfigError;

/// Looks up environment variables (injectable for tests).
pub trait Env {
    /// The variable's value, if set and not empty.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
    pub(super) env: &'a dyn Env,
}

impl Ctx<'_> {
    /// `v`'s value when it is at least `min`; below it, an error at the value (`key`:
    /// `message`). `None` when `v` is.
    pub(super) fn at_least<T: Copy + PartialOrd>(
        &self,
        v: Option<&Spanned<T>>,
        min: T,
        key: &str,
        message: &str,
    ) -> Result<Option<T>, ConfigError> {
        v.map(|n| self.floor(Some(&n.span()), *n.get_ref(), min, key, message))
            .transpose()
    }

    /// `v` when it is at least `min`; below it, an error at `span` (`key`: `message`).
    pub(super) fn floor<T: PartialOrd>(
        &self,
        span: Option<&Range<usize>>,
        v: T,
        min: T,
        key: &str,
        message: impl Into<String>,
    ) -> Result<T, ConfigError> {
        if v < min {
            return Err(self.err(span, key, message));
        }
        Ok(v)
    }

    pub(super) fn err(
        &self,
        span: Option<&Range<usize>>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::at(self.file, self.text, span, Some(key.to_owned()), message)
    }

    /// Replaces `${NAME}` with the variable's value; a missing variable is an error at the key.
    pub(super) fn interpolate(
        &self,
        value: &Spanned<String>,
        key: &str,
    ) -> Result<String, ConfigError> {
        let raw = value.get_ref();
        let mut out = String::with_capacity(raw.len());
        let mut rest = raw.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.err(Some(&value.span()), key, "unterminated `${` in value"));
            };
            let name = &after[..end];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err(
                    Some(&value.span()),
                    key,
                    format!("`${{{name}}}` is not a valid variable name"),
                ));
            }
            match self.env.var(name) {
                Some(v) => out.push_str(&v),
                None => {
                    return Err(self.err(
                        Some(&value.span()),
                        key,
                        format!("environment variable {name} is not set"),
                    ));
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    pub(super) fn opt(
        &self,
        v: &Option<Spanned<String>>,
        key: &str,
    ) -> Result<Option<String>, ConfigError> {
        v.as_ref().map(|s| self.interpolate(s, key)).transpose()
    }
}
