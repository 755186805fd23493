//! kernel.rs against an allow-list: only what a device kernel is, anything else refused.
//!
//! A kernel is PR code compiled on a runner, so the reader accepts what a cutile kernel needs and
//! names everything else with its line, before cargo ever runs: `use` of cutile paths (no
//! renames), one inline `#[cutile::module]` mod holding functions (entries and device helpers)
//! and constants, cutile's own macros, and attributes that change nothing outside the kernel.
//! No list of forbidden things: `include_str!` under another name, a `mod x;` reaching a sibling
//! file, `extern` blocks, `#[no_mangle]` are refused because they are not on the list.
//! One walk over the syntax tree: linear in the file's size.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, File, ImplItem, Item, Macro, Path, TraitItem, UseTree};

use crate::text::compact;

/// The macros a kernel may call: cutile's own (`cutile::core`).
const MACROS: &[&str] = &["const_shape", "const_array"];
/// Attributes a kernel may carry; none reaches outside the kernel.
const ATTRIBUTES: &[&str] = &[
    "cutile::module",
    "cutile::entry",
    "doc",
    "allow",
    "inline",
    "rustfmt::skip",
];
/// File-level inner attributes (`#![...]`).
const INNER_ATTRIBUTES: &[&str] = &["doc", "allow"];

/// One construct that is not on the list, where it is and what it is.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub line: usize,
    pub column: usize,
    pub what: String,
}

pub fn refusals(file: &File) -> Vec<Refusal> {
    // `use <module>::<entry>` at the top reaches the file's own cutile module, nothing else
    let own_module = file.items.iter().find_map(|item| match item {
        Item::Mod(m) if has_attr(&m.attrs, "cutile::module") => Some(m.ident.to_string()),
        _ => None,
    });
    let mut check = Checker {
        own_module,
        ..Checker::default()
    };
    for attr in &file.attrs {
        if !INNER_ATTRIBUTES.contains(&compact(attr.path()).as_str()) {
            check.refuse(
                attr.span(),
                format!("`#![{}]` is not a kernel attribute", compact(attr.path())),
            );
        }
    }
    let mut modules = 0;
    for item in &file.items {
        match item {
            Item::Use(u) => check.use_tree(&u.tree, u.leading_colon.is_some(), u.span()),
            Item::Mod(m) if has_attr(&m.attrs, "cutile::module") => {
                modules += 1;
                if modules > 1 {
                    check.refuse(
                        m.ident.span(),
                        "a second `#[cutile::module]` mod".to_string(),
                    );
                }
                check.attributes(&m.attrs);
                match &m.content {
                    Some((_, items)) => items.iter().for_each(|i| check.module_item(i)),
                    None => check.refuse(
                        m.span(),
                        format!("`mod {};` loads a file: the module must be inline", m.ident),
                    ),
                }
            }
            other => check.refuse(
                other.span(),
                format!("{} outside the `#[cutile::module]` mod", describe(other)),
            ),
        }
    }
    check.found.sort_by_key(|r| (r.line, r.column));
    check.found
}

#[derive(Default)]
struct Checker {
    found: Vec<Refusal>,
    /// Depth of function bodies being walked: items there are refused.
    in_body: usize,
    /// The name of the file's `#[cutile::module]` mod.
    own_module: Option<String>,
}

impl Checker {
    fn refuse(&mut self, span: Span, what: String) {
        let start = span.start();
        self.found.push(Refusal {
            line: start.line,
            column: start.column + 1,
            what,
        });
    }

    fn attributes(&mut self, attrs: &[Attribute]) {
        for attr in attrs {
            self.visit_attribute(attr);
        }
    }

    fn module_item(&mut self, item: &Item) {
        match item {
            Item::Use(u) => {
                self.attributes(&u.attrs);
                self.use_tree(&u.tree, u.leading_colon.is_some(), u.span());
            }
            Item::Fn(f) => {
                self.attributes(&f.attrs);
                if let Some(abi) = &f.sig.abi {
                    self.refuse(abi.span(), format!("`extern` ABI on `fn {}`", f.sig.ident));
                }
                self.visit_signature(&f.sig);
                self.in_body += 1;
                self.visit_block(&f.block);
                self.in_body -= 1;
            }
            Item::Const(c) => {
                self.attributes(&c.attrs);
                self.visit_type(&c.ty);
                self.in_body += 1;
                self.visit_expr(&c.expr);
                self.in_body -= 1;
            }
            other => self.refuse(
                other.span(),
                format!("{} in the `#[cutile::module]` mod", describe(other)),
            ),
        }
    }

    /// `use` must name cutile's paths as they are: no renames, no other crates.
    fn use_tree(&mut self, tree: &UseTree, leading_colon: bool, span: Span) {
        let root = match tree {
            UseTree::Path(p) => Some(p.ident.to_string()),
            UseTree::Name(n) => Some(n.ident.to_string()),
            UseTree::Rename(r) => Some(r.ident.to_string()),
            _ => None,
        };
        match root.as_deref() {
            Some("cutile") => {}
            Some(own) if !leading_colon && self.own_module.as_deref() == Some(own) => {}
            Some(other) => {
                let shown = if leading_colon {
                    format!("::{other}")
                } else {
                    other.to_string()
                };
                return self.refuse(
                    span,
                    format!(
                        "`use {shown}::..`: a kernel imports only from `cutile` and its own module"
                    ),
                );
            }
            None => return self.refuse(span, "a `use` that names no crate".to_string()),
        }
        self.no_renames(tree);
    }

    fn no_renames(&mut self, tree: &UseTree) {
        match tree {
            UseTree::Path(p) => self.no_renames(&p.tree),
            UseTree::Rename(r) => self.refuse(
                r.rename.span(),
                format!("`use .. {} as {}`: a renamed import", r.ident, r.rename),
            ),
            UseTree::Group(g) => g.items.iter().for_each(|t| self.no_renames(t)),
            UseTree::Name(_) | UseTree::Glob(_) => {}
        }
    }
}

impl<'ast> Visit<'ast> for Checker {
    fn visit_attribute(&mut self, attr: &'ast Attribute) {
        let path = compact(attr.path());
        if !ATTRIBUTES.contains(&path.as_str()) {
            self.refuse(
                attr.span(),
                format!("`#[{path}]` is not a kernel attribute"),
            );
        }
        // the attribute's arguments are cutile's to read (`#[cutile::entry(...)]`): not walked
    }

    fn visit_macro(&mut self, mac: &'ast Macro) {
        if !allowed_macro(&mac.path) {
            self.refuse(
                mac.path.span(),
                format!("`{}!` is not a cutile macro", compact(&mac.path)),
            );
        }
        // the arguments are tokens, not syntax: cutile's macros take shapes and literals only
    }

    fn visit_item(&mut self, item: &'ast Item) {
        if self.in_body > 0 {
            return self.refuse(
                item.span(),
                format!("{} inside a function body", describe(item)),
            );
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        self.refuse(item.span(), "an `impl` item".to_string());
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        self.refuse(item.span(), "a `trait` item".to_string());
    }
}

fn allowed_macro(path: &Path) -> bool {
    let Some(last) = path.segments.last() else {
        return false;
    };
    let name = last.ident.to_string();
    if !MACROS.contains(&name.as_str()) {
        return false;
    }
    // `const_shape!` as imported, or spelled out under `cutile::`
    path.segments.len() == 1 && path.leading_colon.is_none()
        || path.segments.first().is_some_and(|s| s.ident == "cutile")
}

fn has_attr(attrs: &[Attribute], path: &str) -> bool {
    attrs.iter().any(|a| compact(a.path()) == path)
}

fn describe(item: &Item) -> String {
    match item {
        Item::Const(c) => format!("`const {}`", c.ident),
        Item::Enum(e) => format!("`enum {}`", e.ident),
        Item::ExternCrate(e) => format!("`extern crate {}`", e.ident),
        Item::Fn(f) => format!("`fn {}`", f.sig.ident),
        Item::ForeignMod(_) => "an `extern` block".to_string(),
        Item::Impl(_) => "an `impl` block".to_string(),
        Item::Macro(m) => match &m.ident {
            Some(name) => format!("`macro_rules! {name}`"),
            None => format!("a `{}!` item", compact(&m.mac.path)),
        },
        Item::Mod(m) if m.content.is_none() => format!("`mod {};` (loads a file)", m.ident),
        Item::Mod(m) => format!("`mod {}`", m.ident),
        Item::Static(s) => format!("`static {}`", s.ident),
        Item::Struct(s) => format!("`struct {}`", s.ident),
        Item::Trait(t) => format!("`trait {}`", t.ident),
        Item::TraitAlias(t) => format!("`trait {}`", t.ident),
        Item::Type(t) => format!("`type {}`", t.ident),
        Item::Union(u) => format!("`union {}`", u.ident),
        Item::Use(_) => "a `use`".to_string(),
        _ => "an item".to_string(),
    }
}
