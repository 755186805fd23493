//! Which memory parameters are written: a small forward taint analysis over an entry body.
//!
//! Every tensor/pointer parameter starts as its own label. A value carries the union of the
//! labels of the values it was computed from (operands, call arguments, method receivers and
//! arguments, the tail of a block, both arms of an `if`). `let` creates a binding in the current
//! scope (so shadowing works); plain assignment adds to the nearest binding. Loop bodies are
//! walked until their bindings stop changing.
//!
//! Reads kill the labels: the result of a `load_*`/`get_*` call, or of a metadata method
//! (`shape()`, `stride()`, ...), is a plain value, not a reference to the memory it came from.
//!
//! Sinks: the receiver of `.partition_full_mut(..)`, `.partition_mut(..)` or `.store*(..)`,
//! and the first argument of any call whose name starts with `store_`. The earliest sink in
//! source order is the evidence for a parameter.
//!
//! `get_num_tile_blocks()` yields the special label `#num_tile_blocks`; a `for` loop whose
//! iterator holds `.step_by(x)` with `x` carrying it is a grid-stride loop.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::LineColumn;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Block, Expr, ExprCall, ExprMethodCall, Local, Macro, Pat, Stmt, Token};

use crate::model::Param;
use crate::text::compact;

type Labels = BTreeSet<String>;

const NUM_BLOCKS: &str = "#num_tile_blocks";
const RECEIVER_SINKS: [&str; 2] = ["partition_full_mut", "partition_mut"];
const METADATA_METHODS: [&str; 9] = [
    "shape", "shapes", "stride", "strides", "dim", "size", "len", "numel", "rank",
];
const MAX_LOOP_PASSES: usize = 8;

#[derive(Debug, Clone)]
pub struct Sink {
    pub name: String,
    pub at: (usize, usize),
}

#[derive(Debug, Default)]
pub struct Flow {
    /// Parameter name -> earliest sink it reaches.
    pub sinks: BTreeMap<String, Sink>,
    /// The `step_by` argument text of the first grid-stride loop, if any.
    pub grid_stride: Option<String>,
}

pub fn analyse(body: &Block, params: &[Param]) -> Flow {
    let mut root = BTreeMap::new();
    for p in params {
        let labels: Labels = if p.is_memory() {
            std::iter::once(p.name.clone()).collect()
        } else {
            Labels::new()
        };
        root.insert(p.name.clone(), labels);
    }
    let mut walker = Walker {
        scopes: vec![root],
        flow: Flow::default(),
        grid_stride_at: None,
    };
    walker.block(body);
    walker.flow
}

struct Walker {
    scopes: Vec<BTreeMap<String, Labels>>,
    flow: Flow,
    grid_stride_at: Option<(usize, usize)>,
}

fn pos(lc: LineColumn) -> (usize, usize) {
    (lc.line, lc.column + 1)
}

/// Last path segment of a called function, e.g. `store_ptr_tko` for `cutile::core::store_ptr_tko::<..>`.
fn callee_name(func: &Expr) -> Option<String> {
    match func {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Expr::Paren(p) => callee_name(&p.expr),
        Expr::Group(g) => callee_name(&g.expr),
        _ => None,
    }
}

fn is_read(name: &str) -> bool {
    name.starts_with("load_") || name.starts_with("get_") || name == "load"
}

impl Walker {
    // ------------------------------------------------------------------ scopes

    fn lookup(&self, name: &str) -> Labels {
        for scope in self.scopes.iter().rev() {
            if let Some(l) = scope.get(name) {
                return l.clone();
            }
        }
        Labels::new()
    }

    fn bind(&mut self, name: String, labels: Labels) {
        if let Some(top) = self.scopes.last_mut() {
            top.insert(name, labels);
        }
    }

    /// Assignment to an existing binding: add the labels (conservative across loop passes).
    fn assign(&mut self, name: &str, labels: Labels) {
        for scope in self.scopes.iter_mut().rev() {
            if let Some(l) = scope.get_mut(name) {
                l.extend(labels);
                return;
            }
        }
    }

    fn bind_pat(&mut self, pat: &Pat, labels: &Labels) {
        let mut names = Vec::new();
        pat_idents(pat, &mut names);
        for n in names {
            self.bind(n, labels.clone());
        }
    }

    fn scoped<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scopes.push(BTreeMap::new());
        let r = f(self);
        self.scopes.pop();
        r
    }

    // ------------------------------------------------------------------ sinks

    fn sink(&mut self, labels: &Labels, name: &str, at: (usize, usize)) {
        for l in labels.iter().filter(|l| !l.starts_with('#')) {
            let better = match self.flow.sinks.get(l) {
                Some(old) => at < old.at,
                None => true,
            };
            if better {
                self.flow.sinks.insert(
                    l.clone(),
                    Sink {
                        name: name.to_string(),
                        at,
                    },
                );
            }
        }
    }

    // ------------------------------------------------------------------ statements

    fn block(&mut self, block: &Block) -> Labels {
        self.scoped(|w| w.stmts(&block.stmts))
    }

    fn stmts(&mut self, stmts: &[Stmt]) -> Labels {
        let mut last = Labels::new();
        for stmt in stmts {
            last = Labels::new();
            match stmt {
                Stmt::Local(local) => self.local(local),
                Stmt::Expr(e, semi) => {
                    let l = self.expr(e);
                    if semi.is_none() {
                        last = l;
                    }
                }
                Stmt::Macro(m) => {
                    self.mac(&m.mac);
                }
                Stmt::Item(_) => {}
            }
        }
        last
    }

    fn local(&mut self, local: &Local) {
        let labels = match &local.init {
            Some(init) => {
                let l = self.expr(&init.expr);
                if let Some((_, diverge)) = &init.diverge {
                    self.expr(diverge);
                }
                l
            }
            None => Labels::new(),
        };
        self.bind_pat(&local.pat, &labels);
    }

    fn mac(&mut self, mac: &Macro) -> Labels {
        // Best effort: macros whose arguments are expressions (`assert!`, `const_shape!`, ...).
        let parsed = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated);
        let mut out = Labels::new();
        if let Ok(args) = parsed {
            for a in &args {
                out.extend(self.expr(a));
            }
        }
        out
    }

    /// Walk a loop body until the bindings it changes stop growing.
    fn loop_body(&mut self, pat: Option<(&Pat, &Labels)>, body: &Block) {
        for _ in 0..MAX_LOOP_PASSES {
            let before = self.scopes.clone();
            self.scoped(|w| {
                if let Some((p, l)) = pat {
                    w.bind_pat(p, l);
                }
                w.stmts(&body.stmts);
            });
            if self.scopes == before {
                break;
            }
        }
    }

    // ------------------------------------------------------------------ expressions

    fn exprs<'a>(&mut self, items: impl IntoIterator<Item = &'a Expr>) -> Labels {
        let mut out = Labels::new();
        for e in items {
            out.extend(self.expr(e));
        }
        out
    }

    fn expr(&mut self, expr: &Expr) -> Labels {
        match expr {
            Expr::Path(p) => {
                if p.qself.is_none() && p.path.segments.len() == 1 {
                    self.lookup(&p.path.segments[0].ident.to_string())
                } else {
                    Labels::new()
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::MethodCall(mc) => self.method_call(mc),
            Expr::Binary(b) => {
                let mut out = self.expr(&b.left);
                out.extend(self.expr(&b.right));
                out
            }
            Expr::Unary(u) => self.expr(&u.expr),
            Expr::Reference(r) => self.expr(&r.expr),
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Cast(c) => self.expr(&c.expr),
            Expr::Field(f) => self.expr(&f.base),
            Expr::Try(t) => self.expr(&t.expr),
            Expr::Await(a) => self.expr(&a.base),
            Expr::Index(i) => {
                let mut out = self.expr(&i.expr);
                out.extend(self.expr(&i.index));
                out
            }
            Expr::Tuple(t) => self.exprs(&t.elems),
            Expr::Array(a) => self.exprs(&a.elems),
            Expr::Repeat(r) => {
                self.expr(&r.len);
                self.expr(&r.expr)
            }
            Expr::Struct(s) => {
                let mut out = self.exprs(s.fields.iter().map(|f| &f.expr));
                if let Some(rest) = &s.rest {
                    out.extend(self.expr(rest));
                }
                out
            }
            Expr::Range(r) => {
                let mut out = Labels::new();
                if let Some(s) = &r.start {
                    out.extend(self.expr(s));
                }
                if let Some(e) = &r.end {
                    out.extend(self.expr(e));
                }
                out
            }
            Expr::Block(b) => self.block(&b.block),
            Expr::Unsafe(u) => self.block(&u.block),
            Expr::Const(c) => self.block(&c.block),
            Expr::Async(a) => self.block(&a.block),
            Expr::TryBlock(t) => self.block(&t.block),
            Expr::If(_)
            | Expr::Let(_)
            | Expr::Match(_)
            | Expr::ForLoop(_)
            | Expr::While(_)
            | Expr::Loop(_) => self.control(expr),
            Expr::Assign(a) => {
                let value = self.expr(&a.right);
                self.expr(&a.left);
                if let Some(name) = assigned_name(&a.left) {
                    self.assign(&name, value);
                }
                Labels::new()
            }
            Expr::Closure(c) => self.scoped(|w| {
                for input in &c.inputs {
                    w.bind_pat(input, &Labels::new());
                }
                w.expr(&c.body)
            }),
            Expr::Macro(m) => self.mac(&m.mac),
            Expr::Return(r) => {
                if let Some(e) = &r.expr {
                    self.expr(e);
                }
                Labels::new()
            }
            Expr::Break(b) => {
                if let Some(e) = &b.expr {
                    self.expr(e);
                }
                Labels::new()
            }
            _ => Labels::new(),
        }
    }

    fn call(&mut self, call: &ExprCall) -> Labels {
        let name = callee_name(&call.func).unwrap_or_default();
        let mut args = Vec::new();
        for a in &call.args {
            args.push(self.expr(a));
        }
        let callee = self.expr(&call.func);
        if name.starts_with("store_") {
            if let Some(first) = args.first() {
                let first = first.clone();
                self.sink(&first, &name, pos(call.span().start()));
            }
            return Labels::new();
        }
        if name == "get_num_tile_blocks" {
            return std::iter::once(NUM_BLOCKS.to_string()).collect();
        }
        if is_read(&name) {
            return Labels::new();
        }
        let mut out = callee;
        for a in args {
            out.extend(a);
        }
        out
    }

    fn method_call(&mut self, mc: &ExprMethodCall) -> Labels {
        let receiver = self.expr(&mc.receiver);
        let args = self.exprs(&mc.args);
        let method = mc.method.to_string();
        let at = pos(mc.method.span().start());
        if RECEIVER_SINKS.contains(&method.as_str())
            || method == "store"
            || method.starts_with("store_")
        {
            self.sink(&receiver, &method, at);
        }
        if is_read(&method) || METADATA_METHODS.contains(&method.as_str()) {
            return Labels::new();
        }
        let mut out = receiver;
        out.extend(args);
        out
    }

    /// Branches and loops.
    fn control(&mut self, expr: &Expr) -> Labels {
        match expr {
            Expr::If(i) => {
                self.expr(&i.cond);
                let mut out = self.block(&i.then_branch);
                if let Some((_, other)) = &i.else_branch {
                    out.extend(self.expr(other));
                }
                out
            }
            Expr::Let(l) => {
                // `if let PAT = EXPR`: bindings are visible in the branch; approximate by binding here.
                let labels = self.expr(&l.expr);
                self.bind_pat(&l.pat, &labels);
                Labels::new()
            }
            Expr::Match(m) => {
                let scrutinee = self.expr(&m.expr);
                let mut out = Labels::new();
                for arm in &m.arms {
                    let l = self.scoped(|w| {
                        w.bind_pat(&arm.pat, &scrutinee);
                        if let Some((_, guard)) = &arm.guard {
                            w.expr(guard);
                        }
                        w.expr(&arm.body)
                    });
                    out.extend(l);
                }
                out
            }
            Expr::ForLoop(f) => {
                let iter = self.expr(&f.expr);
                self.check_grid_stride(&f.expr);
                self.loop_body(Some((&f.pat, &iter)), &f.body);
                Labels::new()
            }
            Expr::While(w) => {
                for _ in 0..MAX_LOOP_PASSES {
                    let before = self.scopes.clone();
                    self.scoped(|s| {
                        s.expr(&w.cond);
                        s.stmts(&w.body.stmts);
                    });
                    if self.scopes == before {
                        break;
                    }
                }
                Labels::new()
            }
            Expr::Loop(l) => {
                self.loop_body(None, &l.body);
                Labels::new()
            }
            _ => Labels::new(),
        }
    }

    /// A `for` iterator holding `.step_by(x)` where `x` derives from `get_num_tile_blocks()`.
    fn check_grid_stride(&mut self, iter: &Expr) {
        let mut steps = Vec::new();
        find_step_by(iter, &mut steps);
        for step in steps {
            let labels = self.expr(step);
            if labels.contains(NUM_BLOCKS) {
                let at = pos(step.span().start());
                if self.grid_stride_at.is_none_or(|old| at < old) {
                    self.grid_stride_at = Some(at);
                    self.flow.grid_stride = Some(compact(step));
                }
            }
        }
    }
}

/// The variable an assignment writes: `x = ..`, `x.f = ..`, `x[i] = ..`, `*x = ..`.
fn assigned_name(lhs: &Expr) -> Option<String> {
    match lhs {
        Expr::Path(p) if p.path.segments.len() == 1 => Some(p.path.segments[0].ident.to_string()),
        Expr::Field(f) => assigned_name(&f.base),
        Expr::Index(i) => assigned_name(&i.expr),
        Expr::Unary(u) => assigned_name(&u.expr),
        Expr::Paren(p) => assigned_name(&p.expr),
        _ => None,
    }
}

/// Arguments of every `.step_by(..)` in an iterator expression.
fn find_step_by<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::MethodCall(mc) => {
            if mc.method == "step_by" {
                if let Some(a) = mc.args.first() {
                    out.push(a);
                }
            }
            find_step_by(&mc.receiver, out);
        }
        Expr::Paren(p) => find_step_by(&p.expr, out),
        Expr::Group(g) => find_step_by(&g.expr, out),
        Expr::Reference(r) => find_step_by(&r.expr, out),
        _ => {}
    }
}

/// Every identifier a pattern binds.
pub fn pat_idents(pat: &Pat, out: &mut Vec<String>) {
    match pat {
        Pat::Ident(pi) => {
            out.push(pi.ident.to_string());
            if let Some((_, sub)) = &pi.subpat {
                pat_idents(sub, out);
            }
        }
        Pat::Tuple(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::TupleStruct(t) => t.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::Struct(s) => s.fields.iter().for_each(|f| pat_idents(&f.pat, out)),
        Pat::Slice(s) => s.elems.iter().for_each(|p| pat_idents(p, out)),
        Pat::Reference(r) => pat_idents(&r.pat, out),
        Pat::Type(t) => pat_idents(&t.pat, out),
        Pat::Paren(p) => pat_idents(&p.pat, out),
        Pat::Or(o) => o.cases.iter().for_each(|p| pat_idents(p, out)),
        _ => {}
    }
}
