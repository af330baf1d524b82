//! Embeddings on the Gemini API: `embedContent` for one text, `batchEmbedContents` for several
//! (<https://ai.google.dev/api/embeddings>). `dimensions` becomes `outputDimensionality`.

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
}
