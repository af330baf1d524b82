//! A `[[routes]]` table: its own keys (`name`, `aliases`) and, read through a view of the
//! rest of the table, its chain settings, so every `[chain]` key is a route key too.

use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use super::raw::ChainConfig;

/// One `[[routes]]` entry: a named chain clients pick with the request's `model`.
///
/// Every `[chain]` setting may appear in a route (the rest of the table is read as a
/// [`ChainConfig`]), so a knob added to `[chain]` is a route knob too.
#[derive(Debug, Clone)]
pub struct RouteConfig {
    /// What clients send as `model`.
    pub name: Spanned<String>,
    /// More names for the same route.
    pub aliases: Vec<Spanned<String>>,
    /// The route's chain settings (`order`, `deadline_ms`, `static_reply`, …).
    pub chain: ChainConfig,
}

impl<'de> Deserialize<'de> for RouteConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RouteVisitor)
    }
}

struct RouteVisitor;

impl<'de> serde::de::Visitor<'de> for RouteVisitor {
    type Value = RouteConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a [[routes]] table with `name` and `order`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RouteConfig, A::Error> {
        let mut own = RouteKeys {
            map,
            name: None,
            aliases: Vec::new(),
        };
        // The chain settings are read through a view of the table without the route's own
        // keys; serde's derive then checks them (unknown keys included) exactly as for
        // `[chain]`, and toml's spans survive because each value is read from toml directly.
        let chain =
            ChainConfig::deserialize(serde::de::value::MapAccessDeserializer::new(&mut own))?;
        let name = own
            .name
            .ok_or_else(|| serde::de::Error::missing_field("name"))?;
        Ok(RouteConfig {
            name,
            aliases: own.aliases,
            chain,
        })
    }
}

/// A route table seen as its chain settings: `name` and `aliases` are taken out on the way.
struct RouteKeys<A> {
    map: A,
    name: Option<Spanned<String>>,
    aliases: Vec<Spanned<String>>,
}

impl<'de, A: serde::de::MapAccess<'de>> serde::de::MapAccess<'de> for &mut RouteKeys<A> {
    type Error = A::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        use serde::de::IntoDeserializer;
        loop {
            let Some(key) = self.map.next_key::<String>()? else {
                return Ok(None);
            };
            match key.as_str() {
                "name" => {
                    if self.name.is_some() {
                        return Err(serde::de::Error::duplicate_field("name"));
                    }
                    self.name = Some(self.map.next_value()?);
                }
                "aliases" => self.aliases = self.map.next_value()?,
                k if !chain_fields().contains(&k) => {
                    // Refused while reading its value, so the error carries the key's line.
                    let never = self.map.next_value_seed(UnknownRouteKey(key))?;
                    match never {}
                }
                _ => return seed.deserialize(key.into_deserializer()).map(Some),
            }
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The keys a route table takes besides the chain settings.
const ROUTE_KEYS: &[&str] = &["name", "aliases"];

/// The keys `[chain]` takes: serde's own list for [`ChainConfig`], so it follows the struct.
fn chain_fields() -> &'static [&'static str] {
    /// A deserializer that only records the field names a struct asks for.
    struct Capture(Option<&'static [&'static str]>);

    impl<'de> serde::Deserializer<'de> for &mut Capture {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom(
                "only struct field names are captured",
            ))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(serde::de::Error::custom("captured"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    static FIELDS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut c = Capture(None);
        let _ = ChainConfig::deserialize(&mut c);
        c.0.unwrap_or(&[])
    })
}

/// The value of a key a route table does not take: deserializing it is the error.
struct UnknownRouteKey(String);

impl<'de> serde::de::DeserializeSeed<'de> for UnknownRouteKey {
    type Value = std::convert::Infallible;

    fn deserialize<D: serde::Deserializer<'de>>(self, _: D) -> Result<Self::Value, D::Error> {
        let mut expected: Vec<&str> = ROUTE_KEYS.to_vec();
        expected.extend_from_slice(chain_fields());
        Err(serde::de::Error::custom(format!(
            "unknown field `{}` in a [[routes]] entry, expected one of {}",
            self.0,
            expected
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}
