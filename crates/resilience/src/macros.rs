//! The crate's few declarative macros, for code that is written the same way many times over.

/// Declares the builder of a policy whose builder holds nothing but the policy being built:
/// `policy_builder!(FooPolicyBuilder => FooPolicy)` writes the struct `FooPolicyBuilder` and
/// `FooPolicy::builder()`, which starts it from `FooPolicy::default()`. The setters (see
/// `ripcord_core::setters!`) and `build`, which validates, are written in the policy's own module.
macro_rules! policy_builder {
    ($builder:ident => $policy:ident) => {
        #[doc = concat!(
                            "Builds a [`", stringify!($policy), "`]; validation happens in [`",
                            stringify!($builder), "::build`]."
                        )]
        #[derive(Debug, Clone)]
        pub struct $builder {
            policy: $policy,
        }

        impl $policy {
            /// A builder starting from the defaults.
            pub fn builder() -> $builder {
                $builder {
                    policy: $policy::default(),
                }
            }
        }
    };
}

/// Writes the part every [`Decorator`](ripcord_core::Decorator) impl of this crate has alike,
/// inside the impl: `inner_model!(inner: M)` says the wrapped model is the field `inner`, of
/// type `M` (`type Inner = M;` and `fn inner(&self) -> &M { &self.inner }`). The hooks a
/// policy overrides follow it, written out.
macro_rules! inner_model {
    ($field:ident: $inner:ty) => {
        type Inner = $inner;

        fn inner(&self) -> &$inner {
            &self.$field
        }
    };
}

/// The [`EmbeddingModel`](ripcord_core::EmbeddingModel) counterpart of `inner_model!`, inside the
/// impl: `inner_embedding_model!(inner)` answers `embedding_id` and `accepts_tokens` from the
/// wrapped model in the field `inner`. The policy's `embed` follows it, written out.
macro_rules! inner_embedding_model {
    ($field:ident) => {
        fn embedding_id(&self) -> &ripcord_core::ModelId {
            self.$field.embedding_id()
        }

        fn accepts_tokens(&self) -> bool {
            self.$field.accepts_tokens()
        }
    };
}
