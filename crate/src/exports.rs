//! `kernel-reader --exports <ffi.rs | ->`: the C functions a Rust file exports, as JSON, for
//! `agent-d check` to hold against the wrapper's cdef: each `extern "C" fn` with its attributes
//! (`no_mangle` and whether it is written `#[unsafe(no_mangle)]`), parameters and return type,
//! each with its line. Read with syn, so comments and layout inside the parameter list do not matter.

use proc_macro2::TokenStream;
use quote::ToTokens;
use serde_json::{json, Value};
use syn::spanned::Spanned;

pub fn exports(source: &str) -> Result<Value, String> {
    let file = syn::parse_file(source).map_err(|e| {
        let at = e.span().start();
        format!("line {}: {e}", at.line)
    })?;
    let mut found = Vec::new();
    for item in &file.items {
        if let syn::Item::Fn(func) = item {
            let abi = func
                .sig
                .abi
                .as_ref()
                .and_then(|a| a.name.as_ref())
                .map(|n| n.value());
            if abi.as_deref() != Some("C") {
                continue;
            }
            found.push(function(func));
        }
    }
    Ok(json!({ "functions": found }))
}

fn function(func: &syn::ItemFn) -> Value {
    let mut no_mangle = false;
    let mut unsafe_attr = false;
    for attr in &func.attrs {
        let text = spelled(attr.meta.to_token_stream());
        if text == "no_mangle" {
            no_mangle = true;
        } else if text == "unsafe(no_mangle)" {
            no_mangle = true;
            unsafe_attr = true;
        }
    }
    let params: Vec<Value> = func
        .sig
        .inputs
        .iter()
        .map(|input| match input {
            syn::FnArg::Typed(pat) => json!({
                "name": spelled(pat.pat.to_token_stream()),
                "type": spelled(pat.ty.to_token_stream()),
                "line": pat.span().start().line,
            }),
            syn::FnArg::Receiver(r) => {
                json!({"name": "self", "type": "self", "line": r.span().start().line})
            }
        })
        .collect();
    let returns = match &func.sig.output {
        syn::ReturnType::Default => String::new(),
        syn::ReturnType::Type(_, ty) => spelled(ty.to_token_stream()),
    };
    json!({
        "name": func.sig.ident.to_string(),
        "line": func.sig.ident.span().start().line,
        "no_mangle": no_mangle,
        "unsafe_no_mangle": unsafe_attr,
        "unsafe_fn": func.sig.unsafety.is_some(),
        "public": matches!(func.vis, syn::Visibility::Public(_)),
        "params": params,
        "returns": returns,
    })
}

/// Tokens as Rust writes them: `*const TensorDesc`, `crate::ffi_util::TensorDesc`, `i32`.
fn spelled(tokens: TokenStream) -> String {
    let mut text = tokens.to_string();
    for (from, to) in [
        ("* const ", "*const "),
        ("* mut ", "*mut "),
        (" :: ", "::"),
        (":: ", "::"),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
    ] {
        text = text.replace(from, to);
    }
    text
}
