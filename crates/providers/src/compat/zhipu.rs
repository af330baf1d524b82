//! Zhipu AI GLM (<https://docs.bigmodel.cn>), OpenAI-compatible at `/api/paas/v4`.
//!
//! Zhipu reports *business codes* in the body, `{"error":{"code":"1113","message":"…"}}`, and
//! reuses HTTP statuses loosely (a spent balance is a 429, like a rate limit), so the code
//! decides. From the vendor's code table (<https://docs.bigmodel.cn/cn/api/api-code>):
//!
//! | codes | meaning | kind |
//! | --- | --- | --- |
//! | 1000–1004 | authentication failed / token invalid or expired | `Auth` |
//! | 1110–1112, 1121, 1220, 1311 | account inactive, missing, locked; no access to the API/model | `PermissionDenied` |
//! | 1113, 1304, 1308, 1309, 1310 | account in arrears; daily/period usage cap reached; plan expired | `QuotaExhausted` |
//! | 1211, 1221, 1222 | model or API does not exist / offline | `ModelNotFound` |
//! | 1210, 1212–1215, 1231 | bad parameters | `InvalidRequest` |
//! | 1261 | prompt too long | `ContextLengthExceeded` |
//! | 1300, 1301 | blocked by policy; unsafe or sensitive content | `ContentFiltered` |
//! | 1302, 1303, 1313 | concurrency / frequency limits | `RateLimited` |
//! | 1305, 1312 | the model is overloaded platform-wide | `Overloaded` |
//! | 500, 1120, 1230, 1234 | internal / network errors | `ServerError` |
//!
//! A stream's `finish_reason: "sensitive"` becomes `FinishReason::ContentFilter`.

use ripcord_core::{ErrorKind, Price};

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("glm-4.6", 200_000, 128_000)
        .price(Price::per_million(0.6, 2.2).with_cached_input(0.11)),
    ModelInfo::chat("glm-4.5", 131_072, 98_304)
        .price(Price::per_million(0.6, 2.2).with_cached_input(0.11)),
    ModelInfo::chat("glm-4.5-air", 131_072, 98_304)
        .price(Price::per_million(0.2, 1.1).with_cached_input(0.03)),
    ModelInfo::new("glm-4.5v", 65_536, 16_384)
        .full()
        .price(Price::per_million(0.6, 1.8)),
    ModelInfo::chat("glm-4-plus", 128_000, 4_095),
    ModelInfo::chat("glm-4-flash", 128_000, 4_095)
        .price(Price::FREE),
    ModelInfo::new("glm-4v", 8_192, 1_024).vision(),
];

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let code: u32 = body.code.as_deref()?.trim().parse().ok()?;
    Some(match code {
        1000..=1004 => ErrorKind::Auth,
        1110..=1112 | 1121 | 1220 | 1311 => ErrorKind::PermissionDenied,
        1113 | 1304 | 1308 | 1309 | 1310 => ErrorKind::QuotaExhausted,
        1211 | 1221 | 1222 => ErrorKind::ModelNotFound,
        1210 | 1212..=1215 | 1231 => ErrorKind::InvalidRequest,
        1261 => ErrorKind::ContextLengthExceeded,
        1300 | 1301 => ErrorKind::ContentFiltered,
        1302 | 1303 | 1313 => ErrorKind::RateLimited,
        1305 | 1312 => ErrorKind::Overloaded,
        500 | 1120 | 1230 | 1234 => ErrorKind::ServerError,
        _ => return None,
    })
}

/// Zhipu GLM: `https://open.bigmodel.cn/api/paas/v4`, key from `ZHIPUAI_API_KEY` (sent as a
/// bearer token), data processed in China.
pub fn zhipu() -> Preset {
    Preset::new("zhipu", "https://open.bigmodel.cn/api/paas/v4")
        .with_key_env("ZHIPUAI_API_KEY")
        .with_base_url_env("ZHIPUAI_BASE_URL")
        .with_region("cn")
        .with_models(MODELS, ModelInfo::chat("", 128_000, 4_096))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    fn body(code: &str, msg: &str) -> String {
        format!(r#"{{"error":{{"code":"{code}","message":"{msg}"}}}}"#)
    }

    #[test]
    fn zhipu_business_codes() {
        let p = zhipu();
        let rows: &[(u16, &str, ErrorKind)] = &[
            (429, "1113", ErrorKind::QuotaExhausted),
            (400, "1301", ErrorKind::ContentFiltered),
            (429, "1302", ErrorKind::RateLimited),
            (429, "1303", ErrorKind::RateLimited),
            (429, "1305", ErrorKind::Overloaded),
            (429, "1304", ErrorKind::QuotaExhausted),
            (401, "1002", ErrorKind::Auth),
            (400, "1211", ErrorKind::ModelNotFound),
            (400, "1261", ErrorKind::ContextLengthExceeded),
            (400, "1214", ErrorKind::InvalidRequest),
            (500, "1234", ErrorKind::ServerError),
            (429, "1112", ErrorKind::PermissionDenied),
        ];
        // Unknown codes fall back to the shared rules.
        let rows: Vec<(u16, String, ErrorKind)> = rows
            .iter()
            .map(|&(status, code, kind)| (status, body(code, "msg"), kind))
            .chain([(429, body("9999", "x"), ErrorKind::RateLimited)])
            .collect();
        let rows: Vec<(u16, &str, ErrorKind)> =
            rows.iter().map(|(s, b, k)| (*s, b.as_str(), *k)).collect();
        assert_kinds(&p, &rows);
        // The business code is kept on the error.
        let e = crate::error_body::http_error(
            429,
            &Default::default(),
            body("1113", "余额不足").as_bytes(),
            p.error_hook,
        );
        assert_eq!(e.vendor_code(), Some("1113"));
        assert_eq!(e.message(), "余额不足");
    }
}
