//! Compact source text for types and shape elements: `-1`, `Foo<T>`, `S[0]`, `*mut E`.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;

/// Tokens joined without spaces, except between two words (`mut E`, `as usize`).
pub fn compact<T: ToTokens>(node: &T) -> String {
    let mut out = String::new();
    write_stream(node.to_token_stream(), &mut out);
    out
}

fn is_word(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Ident(_) | TokenTree::Literal(_))
}

fn write_stream(stream: TokenStream, out: &mut String) {
    let mut prev_word = false;
    for tree in stream {
        let word = is_word(&tree);
        if word && prev_word {
            out.push(' ');
        }
        match &tree {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                write_stream(g.stream(), out);
                out.push_str(close);
            }
            TokenTree::Punct(p) => {
                out.push(p.as_char());
                // `a, b` reads better than `a,b` in lists.
                if p.as_char() == ',' {
                    out.push(' ');
                }
            }
            other => out.push_str(&other.to_string()),
        }
        prev_word = word;
    }
    // No trailing ", " before a closing delimiter.
    if out.ends_with(", ") {
        out.truncate(out.len() - 1);
    }
}

/// The token text as `quote` prints it (used for entry attribute values).
pub fn tokens<T: ToTokens>(node: &T) -> String {
    node.to_token_stream().to_string()
}

#[cfg(test)]
mod tests {
    use super::compact;

    fn ty(src: &str) -> String {
        compact(&syn::parse_str::<syn::Type>(src).unwrap())
    }

    #[test]
    fn compact_text() {
        assert_eq!(ty("* mut E"), "*mut E");
        assert_eq!(ty("Foo < T , U >"), "Foo<T, U>");
        assert_eq!(ty("Tensor<E, { [-1, BM] }>"), "Tensor<E, {[-1, BM]}>");
        assert_eq!(ty("(i32, f32,)"), "(i32, f32,)");
    }
}
