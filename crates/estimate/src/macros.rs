//! `named_enum!`: a `Copy` enum whose values each have one exact string, used in JSON (serde
//! `rename`), on the command line (`FromStr`, which names every accepted value when it refuses
//! one) and on the page (`as_str`, `Display`), with `ALL` listing the values in declaration
//! order. A leaf: the expansion names only [`crate::EstimateError`] and serde's `Serialize` /
//! `Deserialize` (which the calling module imports), so the modules that declare such enums
//! ([`crate::format`], [`crate::spec`], [`crate::deploy`]) need not import one another for it.

macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $s:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $s)] $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact string used in JSON, on the command line and on the page.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::EstimateError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($s => Ok($name::$variant),)+
                    _ => Err($crate::EstimateError::UnknownName {
                        kind: $kind,
                        value: s.to_string(),
                        expected: [$($s),+].join(", "),
                    }),
                }
            }
        }
    };
}
pub(crate) use named_enum;
