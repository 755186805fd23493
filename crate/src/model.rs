//! Plain data gathered from a kernel file; `json.rs` turns it into the printed document.

/// Why no report could be produced. `line`/`column` are 1-based; 0 means "no position".
#[derive(Debug, Clone)]
pub struct Failure {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

impl Failure {
    pub fn nowhere(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            line: 0,
            column: 0,
        }
    }

    pub fn at(message: impl Into<String>, pos: proc_macro2::LineColumn) -> Self {
        Failure {
            message: message.into(),
            line: pos.line,
            column: pos.column + 1,
        }
    }
}

/// A diagnostic about the kernel that does not stop the report.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub level: &'static str, // "error" | "warning"
    pub message: String,
    pub line: usize,
    pub column: usize,
    pub function: String,
}

#[derive(Debug, Clone)]
pub enum Generic {
    Type { name: String, bounds: Vec<String> },
    Const { name: String, ty: String },
}

#[derive(Debug, Clone)]
pub enum ParamKind {
    /// `&Tensor<elem, {[..]}>` / `&mut Tensor<..>`; `shape` is None when not an array literal.
    Tensor {
        elem: String,
        mutable: bool,
        shape: Option<Vec<String>>,
    },
    /// `*mut elem` / `*const elem`.
    Ptr { elem: String, mutable: bool },
    /// A cutile partition type (`MappedPartitionMut<E, D, M>`, `Partition<..>`, `PartitionMut<..>`,
    /// by value or borrowed): not a tensor, and not a scalar either. `name` is the type's last
    /// path segment, `ty` the whole type as compact text.
    Partition {
        elem: String,
        mutable: bool,
        name: String,
        ty: String,
    },
    /// Anything else, by its type text.
    Scalar { ty: String },
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

impl Param {
    /// Tensors, pointers and partitions carry memory; only they can be outputs.
    pub fn is_memory(&self) -> bool {
        !matches!(self.kind, ParamKind::Scalar { .. })
    }
}

#[derive(Debug, Clone, Default)]
pub struct BlockUse {
    pub axes: usize,
    pub grid_stride: bool,
    pub evidence: String,
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub line: usize,
    pub is_unsafe: bool,
    pub public: bool,
    pub attr_args: Vec<(String, String)>,
    pub generics: Vec<Generic>,
    pub params: Vec<Param>,
    /// (param name, evidence), in parameter order.
    pub outputs: Vec<(String, String)>,
    pub block: BlockUse,
}

/// One name a top-level `use` item of the file brings into scope (`*` for a glob).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UseName {
    pub name: String,
    pub path: String,
    pub glob: bool,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub module: String,
    pub entries: Vec<Entry>,
    pub warnings: Vec<Diagnostic>,
    /// The file's top-level `use` names, outside the module: they share a scope with ffi.rs.
    pub file_uses: Vec<UseName>,
    /// What the file holds that a kernel may not (`allow.rs`); when any, nothing else is read.
    pub refused: Vec<crate::allow::Refusal>,
}
