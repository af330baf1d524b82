//! Declarative macros shared by the workspace's crates.

/// Writes a builder's plain setters, inside the builder's `impl` block.
///
/// Builders across the workspace have many setters that each store one value and return the
/// builder; written out, each is four lines of `mut self` … `self` around one assignment. Here
/// each is one line, `name(arg: Type) => field.path = value;`, under its doc comment and other
/// attributes (`#[must_use]`, `#[cfg(..)]`, …, all kept), and becomes
///
/// ```text
/// pub fn name(mut self, arg: Type) -> Self {
///     self.field.path = value;
///     self
/// }
/// ```
///
/// A setter without an argument leaves the parentheses empty
/// (`no_limit() => policy.limit = None;`). A line starting with `pub(crate)` writes a
/// `pub(crate) fn` instead of a `pub fn`. Setters that validate, insert into a collection or set
/// more than one field are written out by hand next to the macro.
///
/// ```
/// # use ripcord_core::setters;
/// #[derive(Default)]
/// struct Limits {
///     max: Option<u32>,
/// }
///
/// impl Limits {
///     setters! {
///         /// Caps the count at `max`.
///         #[must_use]
///         max(max: u32) => max = Some(max);
///         /// Removes the cap.
///         pub(crate) unlimited() => max = None;
///     }
/// }
///
/// assert_eq!(Limits::default().max(3).max, Some(3));
/// assert_eq!(Limits::default().max(3).unlimited().max, None);
/// ```
///
/// Internal to the workspace: hidden from the docs and not covered by semver.
#[doc(hidden)]
#[macro_export]
macro_rules! setters {
    () => {};
    (
        $(#[$meta:meta])*
        pub(crate) $name:ident($($arg:ident: $ty:ty)?) => $($field:ident).+ = $value:expr;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        pub(crate) fn $name(mut self $(, $arg: $ty)?) -> Self {
            self.$($field).+ = $value;
            self
        }
        $crate::setters! { $($rest)* }
    };
    (
        $(#[$meta:meta])*
        $name:ident($($arg:ident: $ty:ty)?) => $($field:ident).+ = $value:expr;
        $($rest:tt)*
    ) => {
        $(#[$meta])*
        pub fn $name(mut self $(, $arg: $ty)?) -> Self {
            self.$($field).+ = $value;
            self
        }
        $crate::setters! { $($rest)* }
    };
}
