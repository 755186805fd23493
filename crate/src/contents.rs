//! `kernel-reader --contents <file.rs>`: what a generated Rust file holds that could act outside it.
//!
//! agent-d checks its own output against an allow-list (`bot/emit/contents.py`): every macro
//! invocation, every path of two or more segments, every attribute and every item that reaches
//! another file or crate (`mod x;`, `extern crate`, an `extern` block). The file is read as
//! tokens, not as syntax, so the bodies of macros (`macro_rules!`, `eprintln!(..)`) are read too:
//! a macro nested in another's arguments is found like any other.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use serde_json::{json, Value};

/// Words before a `!` that negates (`if !ok`), not a macro's name.
const KEYWORDS: &[&str] = &[
    "if", "while", "match", "return", "in", "let", "else", "break", "loop", "move", "as", "mut",
    "ref",
];

#[derive(Default)]
struct Found {
    macros: Vec<(String, usize)>,
    paths: Vec<(String, usize)>,
    attributes: Vec<(String, usize)>,
    items: Vec<(String, usize)>,
}

pub fn contents(source: &str) -> Result<Value, String> {
    let stream: TokenStream = source
        .parse()
        .map_err(|e: proc_macro2::LexError| format!("not Rust tokens: {e:?}"))?;
    let mut found = Found::default();
    walk(stream, &mut found);
    let pairs = |v: &Vec<(String, usize)>| -> Value {
        Value::Array(v.iter().map(|(name, line)| json!([name, line])).collect())
    };
    Ok(json!({
        "macros": pairs(&found.macros),
        "paths": pairs(&found.paths),
        "attributes": pairs(&found.attributes),
        "items": pairs(&found.items),
    }))
}

fn walk(stream: TokenStream, found: &mut Found) {
    let trees: Vec<TokenTree> = stream.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        let line = trees[i].span().start().line;
        match &trees[i] {
            TokenTree::Ident(ident) => {
                let word = ident.to_string();
                let (path, next) = path_at(&trees, i);
                if path.contains("::") {
                    found.paths.push((path.clone(), line));
                }
                if bang_at(&trees, next) && !KEYWORDS.contains(&path.as_str()) {
                    found.macros.push((path, line));
                } else if word == "mod" && semicolon_after_name(&trees, i) {
                    found
                        .items
                        .push(("mod from another file".to_string(), line));
                } else if word == "extern" {
                    if let Some(kind) = extern_item(&trees, i) {
                        found.items.push((kind, line));
                    }
                }
                i = next.max(i + 1);
                continue;
            }
            TokenTree::Punct(p) if p.as_char() == '#' => {
                let at = if matches!(trees.get(i + 1), Some(TokenTree::Punct(q)) if q.as_char() == '!')
                {
                    i + 2
                } else {
                    i + 1
                };
                if let Some(TokenTree::Group(g)) = trees.get(at) {
                    if g.delimiter() == Delimiter::Bracket {
                        let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                        let (mut name, after) = path_at(&inner, 0);
                        if let Some(TokenTree::Group(args)) = inner.get(after) {
                            if name == "unsafe" {
                                // `#[unsafe(no_mangle)]`: the attribute is the one inside
                                let args: Vec<TokenTree> = args.stream().into_iter().collect();
                                name = format!("unsafe({})", path_at(&args, 0).0);
                            }
                        }
                        found.attributes.push((name, line));
                    }
                }
            }
            TokenTree::Group(g) => walk(g.stream(), found),
            _ => {}
        }
        i += 1;
    }
}

/// The path starting at `trees[i]` (`a::b::c`, a leading `::` aside) and the index after it.
fn path_at(trees: &[TokenTree], mut i: usize) -> (String, usize) {
    let mut path = String::new();
    loop {
        match trees.get(i) {
            Some(TokenTree::Ident(ident)) => {
                path.push_str(&ident.to_string());
                i += 1;
            }
            _ => return (path, i),
        }
        let colons = matches!(trees.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ':')
            && matches!(trees.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
        if !colons || !matches!(trees.get(i + 2), Some(TokenTree::Ident(_))) {
            return (path, i);
        }
        path.push_str("::");
        i += 2;
    }
}

/// `!` then a group or a name (`eprintln!(..)`, `macro_rules! name`), not `!=`.
fn bang_at(trees: &[TokenTree], i: usize) -> bool {
    let bang = matches!(trees.get(i), Some(TokenTree::Punct(p))
        if p.as_char() == '!' && p.spacing() == proc_macro2::Spacing::Alone);
    bang && matches!(
        trees.get(i + 1),
        Some(TokenTree::Group(_) | TokenTree::Ident(_))
    )
}

fn semicolon_after_name(trees: &[TokenTree], i: usize) -> bool {
    matches!(trees.get(i + 1), Some(TokenTree::Ident(_)))
        && matches!(trees.get(i + 2), Some(TokenTree::Punct(p)) if p.as_char() == ';')
}

/// `extern crate x` and an `extern "ABI" { .. }` block; `extern "C" fn` is a function's ABI.
fn extern_item(trees: &[TokenTree], i: usize) -> Option<String> {
    match trees.get(i + 1) {
        Some(TokenTree::Ident(next)) if next == "crate" => Some("extern crate".to_string()),
        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
            Some("extern block".to_string())
        }
        Some(TokenTree::Literal(_)) => match trees.get(i + 2) {
            Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                Some("extern block".to_string())
            }
            _ => None,
        },
        _ => None,
    }
}
