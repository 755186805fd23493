//! Find the `#[cutile::module]` mod, its entries, and each entry's declared signature.

use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, FnArg, GenericArgument, GenericParam, Item, ItemFn, ItemMod, Meta, Pat,
    PathArguments, Token, Type, TypeParamBound, Visibility, WherePredicate,
};

use crate::model::{Diagnostic, Entry, Failure, Generic, Param, ParamKind, Report};
use crate::text::{compact, tokens};
use crate::{blockid, dataflow};

/// Parse a whole kernel file and describe its cutile module.
pub fn read_kernel(source: &str) -> Result<Report, Failure> {
    let source = source.strip_prefix('\u{feff}').unwrap_or(source);
    let file = syn::parse_file(source).map_err(|err| match err.into_iter().next() {
        Some(first) => Failure::at(format!("Rust syntax error: {first}"), first.span().start()),
        None => Failure::nowhere("Rust syntax error"),
    })?;

    let mut modules = Vec::new();
    collect_modules(&file.items, &mut modules);
    let Some(module) = modules.first().copied() else {
        return Err(Failure::nowhere("no `#[cutile::module]` mod in this file"));
    };
    let Some((_, items)) = &module.content else {
        return Err(Failure::at(
            "the `#[cutile::module]` mod must be inline (`mod m { ... }`), not loaded from a file",
            module.ident.span().start(),
        ));
    };

    let mut warnings = Vec::new();
    for extra in modules.iter().skip(1) {
        warnings.push(diag(
            "warning",
            format!(
                "more than one `#[cutile::module]` in the file; only `{}` is read",
                module.ident
            ),
            extra.ident.span(),
            "",
        ));
    }

    let mut entries = Vec::new();
    for item in items {
        if let Item::Fn(func) = item {
            if let Some(entry) = read_entry(func, &mut warnings) {
                entries.push(entry);
            }
        }
    }
    Ok(Report {
        module: module.ident.to_string(),
        entries,
        warnings,
    })
}

fn diag(
    level: &'static str,
    message: String,
    span: proc_macro2::Span,
    function: &str,
) -> Diagnostic {
    let start = span.start();
    Diagnostic {
        level,
        message,
        line: start.line,
        column: start.column + 1,
        function: function.to_string(),
    }
}

/// The path of an attribute as written, e.g. `cutile::entry` or `::cutile::entry`.
fn attr_path(attr: &Attribute) -> String {
    compact(attr.path())
}

fn collect_modules<'a>(items: &'a [Item], out: &mut Vec<&'a ItemMod>) {
    for item in items {
        if let Item::Mod(m) = item {
            if m.attrs.iter().any(|a| attr_path(a) == "cutile::module") {
                out.push(m);
            } else if let Some((_, inner)) = &m.content {
                collect_modules(inner, out);
            }
        }
    }
}

/// An entry when the fn carries `#[cutile::entry(...)]`; diagnostics for near misses.
fn read_entry(func: &ItemFn, warnings: &mut Vec<Diagnostic>) -> Option<Entry> {
    let name = func.sig.ident.to_string();
    let mut entry_attr = None;
    for attr in &func.attrs {
        let path = attr_path(attr);
        let last_is_entry = attr
            .path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "entry");
        if path == "cutile::entry" {
            match &attr.meta {
                Meta::List(list) => entry_attr = Some(list),
                _ => warnings.push(diag(
                    "error",
                    "entry attribute without parentheses produces no launcher: write `#[cutile::entry()]`"
                        .to_string(),
                    attr.span(),
                    &name,
                )),
            }
        } else if last_is_entry && path.contains("cutile") {
            warnings.push(diag(
                "error",
                format!("entry attribute spelled `{path}`: only `#[cutile::entry(...)]` produces a launcher"),
                attr.span(),
                &name,
            ));
        }
    }
    let list = entry_attr?;

    let attr_args = read_attr_args(list, &name, warnings);
    let generics = read_generics(func);
    let params = read_params(func, warnings);
    let flow = dataflow::analyse(&func.block, &params);
    let mut block = blockid::analyse(&func.block);
    block.grid_stride = flow.grid_stride.is_some();
    if let Some(step) = &flow.grid_stride {
        let stride = format!("for .. in ..step_by({step}) over get_num_tile_blocks()");
        block.evidence = if block.evidence.is_empty() {
            stride
        } else {
            format!("{}; {stride}", block.evidence)
        };
    }

    let mut outputs = Vec::new();
    for p in &params {
        if let ParamKind::Tensor { mutable: true, .. } = p.kind {
            outputs.push((p.name.clone(), "&mut".to_string()));
        } else if let Some(sink) = flow.sinks.get(&p.name) {
            outputs.push((p.name.clone(), sink.name.clone()));
        }
    }

    Some(Entry {
        name,
        line: func.sig.ident.span().start().line,
        is_unsafe: func.sig.unsafety.is_some(),
        public: matches!(func.vis, Visibility::Public(_)),
        attr_args,
        generics,
        params,
        outputs,
        block,
    })
}

fn read_attr_args(
    list: &syn::MetaList,
    func: &str,
    warnings: &mut Vec<Diagnostic>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let metas = match list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) {
        Ok(m) => m,
        Err(err) => {
            warnings.push(diag(
                "warning",
                format!("entry attribute arguments are not `key = value` pairs: {err}"),
                err.span(),
                func,
            ));
            return out;
        }
    };
    for meta in metas {
        match meta {
            Meta::NameValue(nv) => out.push((compact(&nv.path), tokens(&nv.value))),
            Meta::Path(p) => warnings.push(diag(
                "warning",
                format!(
                    "bare flag `{0}` is ignored by cutile: write `{0} = true`",
                    compact(&p)
                ),
                p.span(),
                func,
            )),
            Meta::List(l) => warnings.push(diag(
                "warning",
                format!(
                    "entry argument `{}` is not `key = value` and is ignored by cutile",
                    compact(&l.path)
                ),
                l.span(),
                func,
            )),
        }
    }
    out
}

fn read_generics(func: &ItemFn) -> Vec<Generic> {
    let mut out = Vec::new();
    for param in &func.sig.generics.params {
        match param {
            GenericParam::Type(t) => {
                let mut bounds: Vec<String> = t.bounds.iter().map(bound_text).collect();
                if let Some(wc) = &func.sig.generics.where_clause {
                    for pred in &wc.predicates {
                        if let WherePredicate::Type(pt) = pred {
                            if t.ident == compact(&pt.bounded_ty) {
                                bounds.extend(pt.bounds.iter().map(bound_text));
                            }
                        }
                    }
                }
                out.push(Generic::Type {
                    name: t.ident.to_string(),
                    bounds,
                });
            }
            GenericParam::Const(c) => out.push(Generic::Const {
                name: c.ident.to_string(),
                ty: compact(&c.ty),
            }),
            GenericParam::Lifetime(_) => {}
        }
    }
    out
}

fn bound_text(b: &TypeParamBound) -> String {
    compact(b)
}

fn read_params(func: &ItemFn, warnings: &mut Vec<Diagnostic>) -> Vec<Param> {
    let fname = func.sig.ident.to_string();
    let mut out = Vec::new();
    for arg in &func.sig.inputs {
        let FnArg::Typed(pt) = arg else {
            warnings.push(diag(
                "warning",
                "entry takes `self`".to_string(),
                arg.span(),
                &fname,
            ));
            continue;
        };
        let name = match &*pt.pat {
            Pat::Ident(pi) => pi.ident.to_string(),
            other => compact(other),
        };
        let kind = classify(&pt.ty);
        if let ParamKind::Tensor { shape: None, .. } = &kind {
            warnings.push(diag(
                "warning",
                format!("tensor parameter `{name}`: shape is not an array literal, rank unknown"),
                pt.ty.span(),
                &fname,
            ));
        }
        out.push(Param { name, kind });
    }
    out
}

fn strip_group(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => strip_group(&g.elem),
        Type::Paren(p) => strip_group(&p.elem),
        other => other,
    }
}

/// Parameter type -> tensor / pointer / scalar.
pub fn classify(ty: &Type) -> ParamKind {
    match strip_group(ty) {
        Type::Reference(r) => {
            if let Some((elem, shape)) = tensor_args(strip_group(&r.elem)) {
                return ParamKind::Tensor {
                    elem,
                    mutable: r.mutability.is_some(),
                    shape,
                };
            }
        }
        Type::Ptr(p) => {
            return ParamKind::Ptr {
                elem: compact(&p.elem),
                mutable: p.mutability.is_some(),
            };
        }
        _ => {}
    }
    ParamKind::Scalar { ty: compact(ty) }
}

/// `Tensor<E, {[d0, d1]}>` -> `("E", Some(["d0", "d1"]))`.
fn tensor_args(ty: &Type) -> Option<(String, Option<Vec<String>>)> {
    let Type::Path(tp) = ty else { return None };
    let last = tp.path.segments.last()?;
    if last.ident != "Tensor" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut it = args.args.iter();
    let elem = match it.next()? {
        GenericArgument::Type(t) => compact(t),
        other => compact(other),
    };
    let shape = it.next().and_then(shape_elements);
    Some((elem, shape))
}

fn shape_elements(arg: &GenericArgument) -> Option<Vec<String>> {
    let GenericArgument::Const(expr) = arg else {
        return None;
    };
    array_of(expr)
}

fn array_of(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            syn::Stmt::Expr(inner, None) => array_of(inner),
            _ => None,
        },
        Expr::Paren(p) => array_of(&p.expr),
        Expr::Group(g) => array_of(&g.expr),
        Expr::Array(a) => Some(a.elems.iter().map(compact).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::read_kernel;

    #[test]
    fn syntax_error_position() {
        let err = read_kernel("mod m {\n  fn f() { let = ; }\n}\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.column > 1);
    }

    #[test]
    fn entry_needs_list_attribute() {
        let src = "#[cutile::module] mod m {\n #[cutile::entry] fn a() {}\n #[cutile::entry()] fn b() {}\n fn c() {}\n}";
        let report = read_kernel(src).unwrap();
        assert_eq!(report.module, "m");
        let names: Vec<_> = report.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert_eq!(report.warnings.len(), 1);
        assert_eq!(report.warnings[0].level, "error");
        assert_eq!(report.warnings[0].line, 2);
    }
}
