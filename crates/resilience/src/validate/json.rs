//! The built-in JSON validator: JSON answers must parse, and match the schema when one is given.
//!
//! The schema check is a small structural subset of JSON Schema — `type` (one or several),
//! `properties`, `required`, `additionalProperties: false`, `items`, `enum`, `const`,
//! `minItems`/`maxItems`, `minLength`/`maxLength` and `anyOf` — enough to catch a model that
//! answered in the wrong shape. Other keywords are ignored (never a false failure).

use ripcord_core::{ChatRequest, ChatResponse, ResponseFormat};
use serde_json::Value;

use super::Validator;

/// Checks JSON answers: for `ResponseFormat::Json` the content must be valid JSON; for
/// `ResponseFormat::JsonSchema` it must also match the schema; and every tool call's arguments
/// must be a JSON object. Text answers without tool calls pass.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatRequest, ChatResponse, ResponseFormat};
/// use ripcord_resilience::{JsonValidator, Validator};
/// let schema = serde_json::json!({
///     "type": "object",
///     "properties": { "city": { "type": "string" } },
///     "required": ["city"]
/// });
/// let req = ChatRequest::user("Where?").with_response_format(ResponseFormat::JsonSchema {
///     name: "place".into(), schema, strict: true,
/// });
/// assert!(JsonValidator.validate(&req, &ChatResponse::new(r#"{"city": "Oslo"}"#)).is_ok());
/// let err = JsonValidator.validate(&req, &ChatResponse::new(r#"{"town": "Oslo"}"#)).unwrap_err();
/// assert!(err.contains("city"), "{err}");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonValidator;

impl Validator for JsonValidator {
    fn validate(&self, req: &ChatRequest, resp: &ChatResponse) -> Result<(), String> {
        for call in &resp.tool_calls {
            match serde_json::from_str::<Value>(&call.arguments) {
                Ok(Value::Object(_)) => {}
                Ok(_) => {
                    return Err(format!(
                        "tool call {:?}: arguments are not a JSON object",
                        call.name
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "tool call {:?}: arguments are not valid JSON: {e}",
                        call.name
                    ));
                }
            }
        }
        if !req.response_format.is_json()
            || (resp.content.is_empty() && !resp.tool_calls.is_empty())
        {
            return Ok(());
        }
        let value: Value = serde_json::from_str(&resp.content)
            .map_err(|e| format!("the answer is not valid JSON: {e}"))?;
        if let ResponseFormat::JsonSchema { schema, name, .. } = &req.response_format {
            check(schema, &value, "$")
                .map_err(|e| format!("the answer does not match schema {name:?}: {e}"))?;
        }
        Ok(())
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    let actual = type_name(v);
    actual == t || (t == "number" && actual == "integer")
}

fn as_len(v: Option<&Value>) -> Option<usize> {
    v.and_then(Value::as_u64)
        .and_then(|n| usize::try_from(n).ok())
}

/// Checks `value` against `schema`; the error names the path.
pub(crate) fn check(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Value::Object(s) = schema else {
        // `true` / `{}`-like schemas accept everything; `false` rejects.
        return match schema {
            Value::Bool(false) => Err(format!("{path}: no value is allowed here")),
            _ => Ok(()),
        };
    };
    match s.get("type") {
        Some(Value::String(t)) if !is_type(value, t) => {
            return Err(format!("{path}: expected {t}, got {}", type_name(value)));
        }
        Some(Value::Array(ts))
            if !ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| is_type(value, t)) =>
        {
            return Err(format!(
                "{path}: expected one of {}, got {}",
                Value::Array(ts.clone()),
                type_name(value)
            ));
        }
        _ => {}
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        return Err(format!("{path}: expected {c}"));
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        return Err(format!(
            "{path}: {value} is not one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(Value::Array(any)) = s.get("anyOf")
        && !any.iter().any(|sub| check(sub, value, path).is_ok())
    {
        return Err(format!("{path}: matches none of anyOf"));
    }
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(required)) = s.get("required") {
                for r in required.iter().filter_map(Value::as_str) {
                    if !obj.contains_key(r) {
                        return Err(format!("{path}: missing required property {r:?}"));
                    }
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            for (k, v) in obj {
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => check(sub, v, &format!("{path}.{k}"))?,
                    None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return Err(format!("{path}: property {k:?} is not allowed"));
                    }
                    None => {
                        if let Some(extra @ Value::Object(_)) = s.get("additionalProperties") {
                            check(extra, v, &format!("{path}.{k}"))?;
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(min) = as_len(s.get("minItems"))
                && items.len() < min
            {
                return Err(format!(
                    "{path}: {} items, at least {min} required",
                    items.len()
                ));
            }
            if let Some(max) = as_len(s.get("maxItems"))
                && items.len() > max
            {
                return Err(format!(
                    "{path}: {} items, at most {max} allowed",
                    items.len()
                ));
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count();
            if let Some(min) = as_len(s.get("minLength"))
                && n < min
            {
                return Err(format!("{path}: shorter than {min} characters"));
            }
            if let Some(max) = as_len(s.get("maxLength"))
                && n > max
            {
                return Err(format!("{path}: longer than {max} characters"));
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ripcord_core::ToolCall;
    use serde_json::json;

    use super::*;

    #[test]
    fn schema_subset_reports_the_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "items": { "type": "array", "items": { "type": "integer" }, "maxItems": 3 },
                "mood": { "enum": ["happy", "sad"] },
                "note": { "type": ["string", "null"] }
            },
            "required": ["items"],
            "additionalProperties": false
        });
        assert!(
            check(
                &schema,
                &json!({"items": [1, 2], "mood": "sad", "note": null}),
                "$"
            )
            .is_ok()
        );
        assert_eq!(
            check(&schema, &json!({"items": [1, "x"]}), "$").unwrap_err(),
            "$.items[1]: expected integer, got string"
        );
        assert!(
            check(&schema, &json!({"items": [], "extra": 1}), "$")
                .unwrap_err()
                .contains("\"extra\"")
        );
        assert!(
            check(&schema, &json!({"items": [1, 2, 3, 4]}), "$")
                .unwrap_err()
                .contains("at most 3")
        );
        assert!(
            check(&schema, &json!({"mood": "sad"}), "$")
                .unwrap_err()
                .contains("missing required")
        );
        assert!(
            check(&schema, &json!({"items": [], "mood": "meh"}), "$")
                .unwrap_err()
                .contains("not one of")
        );
        assert!(check(&json!({"type": "number"}), &json!(3), "$").is_ok());
    }

    #[test]
    fn json_mode_needs_json_and_tool_arguments_need_objects() {
        let req = ChatRequest::user("x").with_response_format(ResponseFormat::Json);
        assert!(
            JsonValidator
                .validate(&req, &ChatResponse::new("{\"a\":1}"))
                .is_ok()
        );
        assert!(
            JsonValidator
                .validate(&req, &ChatResponse::new("Sure! {\"a\":1}"))
                .is_err()
        );
        let text = ChatRequest::user("x");
        assert!(
            JsonValidator
                .validate(&text, &ChatResponse::new("plain words"))
                .is_ok()
        );
        let bad_call =
            ChatResponse::new("").with_tool_calls(vec![ToolCall::new("1", "f", "{oops")]);
        assert!(
            JsonValidator
                .validate(&text, &bad_call)
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}
