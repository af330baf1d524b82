//! The crate's few declarative macros, for code that is written the same way many times over.

/// Writes a builder's plain setters, inside the builder's `impl` block.
///
/// Every policy builder has many setters that each store one value and return the builder;
/// written out, each is four lines of `mut self` … `self` around one assignment. Here each is
/// one line, `name(arg: Type) => field.path = value;`, under its doc comment, and becomes
///
/// ```text
/// pub fn name(mut self, arg: Type) -> Self {
///     self.field.path = value;
///     self
/// }
/// ```
///
/// A setter without an argument leaves the parentheses empty (`no_limit() => policy.limit = None;`).
/// Setters that validate, insert into a collection or set more than one field are written out
/// by hand next to the macro.
macro_rules! setters {
    ($(
        $(#[$meta:meta])*
        $name:ident($($arg:ident: $ty:ty)?) => $($field:ident).+ = $value:expr;
    )*) => {
        $(
            $(#[$meta])*
            pub fn $name(mut self $(, $arg: $ty)?) -> Self {
                self.$($field).+ = $value;
                self
            }
        )*
    };
}

/// Declares the builder of a policy whose builder holds nothing but the policy being built:
/// `policy_builder!(FooPolicyBuilder => FooPolicy)` writes the struct `FooPolicyBuilder` and
/// `FooPolicy::builder()`, which starts it from `FooPolicy::default()`. The setters (see
/// [`setters!`]) and `build`, which validates, are written in the policy's own module.
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
