//! Embeddings on the Gemini API: `embedContent` for one text, `batchEmbedContents` for several
//! (<https://ai.google.dev/api/embeddings>). `dimensions` becomes `outputDimensionality`.
//!
//! Vertex AI's text-embedding models (`text-embedding-005`, `gemini-embedding-001`, …) speak
//! the older prediction wire instead
//! (<https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api>):
//! `…/publishers/google/models/{m}:predict` with `{"instances": [{"content", "task_type"?}],
//! "parameters": {"outputDimensionality"?}}`, answered by `{"predictions": [{"embeddings":
//! {"values", "statistics": {"token_count", "truncated"}}}]}` — one prediction per instance, in
//! order; the token counts add up to the call's input tokens.

use ripcord_core::{EmbeddingRequest, EmbeddingResponse, Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

use super::error_map::GoogleError;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedRequest<'a> {
    model: &'a str,
    content: EmbedContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct EmbedContent<'a> {
    parts: [Text<'a>; 1],
}

#[derive(Serialize)]
struct Text<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct Batch<'a> {
    requests: Vec<EmbedRequest<'a>>,
}

#[derive(Deserialize)]
struct Values {
    values: Vec<f32>,
}

#[derive(Deserialize)]
struct One {
    embedding: Values,
}

#[derive(Deserialize)]
struct Many {
    embeddings: Vec<Values>,
}

/// The body, and whether it is the single-text call.
pub(crate) fn body(model: &str, req: &EmbeddingRequest) -> Result<(Vec<u8>, bool)> {
    if !req.tokens.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "Gemini embeds texts only; this request gives its inputs as token ids",
        ));
    }
    if req.inputs.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "an embedding request needs at least one input",
        ));
    }
    let name = format!("models/{model}");
    fn one<'a>(model: &'a str, text: &'a str, dims: Option<u32>) -> EmbedRequest<'a> {
        EmbedRequest {
            model,
            content: EmbedContent {
                parts: [Text { text }],
            },
            output_dimensionality: dims,
        }
    }
    let (bytes, single) = if let [only] = req.inputs.as_slice() {
        (serde_json::to_vec(&one(&name, only, req.dimensions)), true)
    } else {
        let batch = Batch {
            requests: req
                .inputs
                .iter()
                .map(|t| one(&name, t, req.dimensions))
                .collect(),
        };
        (serde_json::to_vec(&batch), false)
    };
    let bytes = bytes.map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the Gemini embedding request: {e}"),
        )
    })?;
    Ok((bytes, single))
}

/// Parses either answer; the vector count must match the inputs.
pub(crate) fn parse(raw: &[u8], expected: usize, model: &str) -> Result<EmbeddingResponse> {
    if let Some(g) = GoogleError::parse(raw) {
        return Err(g.to_error(None, None));
    }
    let bad = |e: serde_json::Error| {
        Error::new(
            ErrorKind::InvalidResponse,
            format!("the Gemini embedding response is not valid: {e}"),
        )
        .with_source(e)
    };
    let vectors = if expected == 1 {
        vec![
            serde_json::from_slice::<One>(raw)
                .map_err(bad)?
                .embedding
                .values,
        ]
    } else {
        serde_json::from_slice::<Many>(raw)
            .map_err(bad)?
            .embeddings
            .into_iter()
            .map(|v| v.values)
            .collect()
    };
    if vectors.len() != expected {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            format!(
                "Gemini returned {} embeddings for {expected} inputs",
                vectors.len()
            ),
        ));
    }
    Ok(EmbeddingResponse::new(vectors, model))
}

#[cfg(feature = "vertex")]
#[derive(Serialize)]
struct PredictRequest<'a> {
    instances: Vec<Instance<'a>>,
    #[serde(skip_serializing_if = "Params::is_empty")]
    parameters: Params,
}

#[cfg(feature = "vertex")]
#[derive(Serialize)]
struct Instance<'a> {
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_type: Option<&'a str>,
}

#[cfg(feature = "vertex")]
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[cfg(feature = "vertex")]
impl Params {
    fn is_empty(&self) -> bool {
        self.output_dimensionality.is_none()
    }
}

#[cfg(feature = "vertex")]
#[derive(Deserialize)]
struct Predictions {
    predictions: Vec<Prediction>,
}

#[cfg(feature = "vertex")]
#[derive(Deserialize)]
struct Prediction {
    embeddings: PredictedEmbedding,
}

#[cfg(feature = "vertex")]
#[derive(Deserialize)]
struct PredictedEmbedding {
    values: Vec<f32>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[cfg(feature = "vertex")]
#[derive(Deserialize)]
struct Statistics {
    #[serde(default)]
    token_count: f64,
}

/// The `:predict` body of a Vertex AI text-embedding call: one instance per input, each with
/// `task_type` when one is configured (`RETRIEVAL_DOCUMENT`, `RETRIEVAL_QUERY`, …).
#[cfg(feature = "vertex")]
pub(crate) fn vertex_body(req: &EmbeddingRequest, task_type: Option<&str>) -> Result<Vec<u8>> {
    if req.inputs.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidRequest,
            "an embedding request needs at least one input",
        ));
    }
    let body = PredictRequest {
        instances: req
            .inputs
            .iter()
            .map(|content| Instance { content, task_type })
            .collect(),
        parameters: Params {
            output_dimensionality: req.dimensions,
        },
    };
    serde_json::to_vec(&body).map_err(|e| {
        Error::new(
            ErrorKind::InvalidRequest,
            format!("cannot serialise the Vertex embedding request: {e}"),
        )
    })
}

/// Parses a `:predict` answer: the vectors in input order, their token counts as input usage.
#[cfg(feature = "vertex")]
pub(crate) fn vertex_parse(raw: &[u8], expected: usize, model: &str) -> Result<EmbeddingResponse> {
    if let Some(g) = GoogleError::parse(raw) {
        return Err(g.to_error(None, None));
    }
    let p: Predictions = serde_json::from_slice(raw).map_err(|e| {
        Error::new(
            ErrorKind::InvalidResponse,
            format!("the Vertex embedding response is not valid: {e}"),
        )
        .with_source(e)
    })?;
    if p.predictions.len() != expected {
        return Err(Error::new(
            ErrorKind::InvalidResponse,
            format!(
                "Vertex returned {} embeddings for {expected} inputs",
                p.predictions.len()
            ),
        ));
    }
    let mut tokens = 0u64;
    let mut vectors = Vec::with_capacity(expected);
    for (i, pred) in p.predictions.into_iter().enumerate() {
        if pred.embeddings.values.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidResponse,
                format!("Vertex returned an empty embedding for input {i}"),
            ));
        }
        if let Some(s) = pred.embeddings.statistics {
            // Vertex writes the count as a JSON number that may carry a fraction (`6.0`).
            if s.token_count.is_finite() && s.token_count >= 0.0 {
                tokens += s.token_count as u64;
            }
        }
        vectors.push(pred.embeddings.values);
    }
    let mut r = EmbeddingResponse::new(vectors, model);
    r.usage = ripcord_core::Usage::new(tokens, 0);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn single_and_batch_bodies_and_answers() {
        let mut req = EmbeddingRequest::new(vec!["a".into()]);
        req.dimensions = Some(256);
        let (b, single) = body("gemini-embedding-001", &req).unwrap();
        assert!(single);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "a"}]}, "outputDimensionality": 256})
        );
        let req = EmbeddingRequest::new(vec!["a".into(), "b".into()]);
        let (b, single) = body("m", &req).unwrap();
        assert!(!single);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["requests"][1]["content"]["parts"][0]["text"], "b");
        let r = parse(
            br#"{"embeddings":[{"values":[0.1,0.2]},{"values":[0.3,0.4]}]}"#,
            2,
            "m",
        )
        .unwrap();
        assert_eq!(r.vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
        let r = parse(br#"{"embedding":{"values":[1.0]}}"#, 1, "m").unwrap();
        assert_eq!(r.vectors, vec![vec![1.0]]);
        let e = parse(br#"{"embeddings":[{"values":[1.0]}]}"#, 2, "m").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = body("m", &EmbeddingRequest::new(vec![])).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    }

    #[cfg(feature = "vertex")]
    #[test]
    fn vertex_predict_bodies_and_answers() {
        let mut req = EmbeddingRequest::new(vec!["a".into(), "b".into()]);
        let v: Value = serde_json::from_slice(&vertex_body(&req, None).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"instances": [{"content": "a"}, {"content": "b"}]})
        );
        req.dimensions = Some(256);
        let b = vertex_body(&req, Some("RETRIEVAL_QUERY")).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            json!({"instances": [{"content": "a", "task_type": "RETRIEVAL_QUERY"},
                                 {"content": "b", "task_type": "RETRIEVAL_QUERY"}],
                   "parameters": {"outputDimensionality": 256}})
        );
        let raw = br#"{"predictions":[
            {"embeddings":{"statistics":{"truncated":false,"token_count":6},"values":[0.1,0.2]}},
            {"embeddings":{"statistics":{"truncated":false,"token_count":4.0},"values":[0.3,0.4]}}],
            "metadata":{"billableCharacterCount":2}}"#;
        let r = vertex_parse(raw, 2, "text-embedding-005").unwrap();
        assert_eq!(r.vectors, vec![vec![0.1, 0.2], vec![0.3, 0.4]]);
        assert_eq!(r.usage.input_tokens, 10);
        assert_eq!(r.model, "text-embedding-005");
        let e = vertex_parse(raw, 3, "m").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        assert!(e.message().contains("2 embeddings for 3 inputs"), "{e}");
        let e =
            vertex_parse(br#"{"predictions":[{"embeddings":{"values":[]}}]}"#, 1, "m").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = vertex_parse(br#"{"embedding":{"values":[1.0]}}"#, 1, "m").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidResponse);
        let e = vertex_parse(
            br#"{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: textembedding-gecko.","status":"RESOURCE_EXHAUSTED"}}"#,
            1,
            "m",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::RateLimited);
        let e = vertex_body(&EmbeddingRequest::new(vec![]), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    }
}
