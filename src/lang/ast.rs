//! The abstract syntax tree. Every node carries its byte [`Span`].

use crate::error::span::Span;
use std::fmt::Write;

/// A name and where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole source file: its functions in source order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Module {
    pub items: Vec<FnDef>,
}

/// `@name(arg, ...)` before a function.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub name: Ident,
    pub args: Vec<Ident>,
    pub span: Span,
}

/// `fn name[N, ...](p: T, ...) -> T { ... }` or `... -> T = expr`.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDef {
    pub attrs: Vec<Attr>,
    pub name: Ident,
    pub size_params: Vec<Ident>,
    /// `T: Float` in the brackets: an element-type parameter and the
    /// bound its element type must meet.
    pub bounds: Vec<(Ident, Ident)>,
    pub params: Vec<ParamDecl>,
    pub ret: TypeExpr,
    pub body: Expr,
    /// From `fn` (or the first attribute) to the end of the body.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    /// `static n: i64`: the value is known when the function is specialized.
    pub is_static: bool,
    /// `data y: i64`: a run-time integer that is a value (a label, an
    /// index), not a count: not a size parameter, and may be negative.
    pub is_data: bool,
    pub span: Span,
}

/// A written type: `f32`, `f64[N, 3]`, or a tuple `(T, U)`.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    Named {
        dtype: Ident,
        dims: Vec<DimExpr>,
        span: Span,
    },
    Tuple {
        elems: Vec<TypeExpr>,
        span: Span,
    },
}

impl TypeExpr {
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named { span, .. } | TypeExpr::Tuple { span, .. } => *span,
        }
    }
}

/// One dimension of a written array type.
#[derive(Clone, Debug, PartialEq)]
pub enum DimExpr {
    Lit(u64, Span),
    Name(Ident),
    /// `N-k`: a size parameter less a constant.
    Sub(Ident, u64, Span),
    /// `a + b`, `a - b` or `a * b` of dimensions (a size expression such
    /// as `N+1`, `2*N`, `N*M`; parentheses group).
    Bin(DimOp, Box<DimExpr>, Box<DimExpr>, Span),
}

/// The operator of a [`DimExpr::Bin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimOp {
    Add,
    Sub,
    Mul,
}

impl DimExpr {
    pub fn span(&self) -> Span {
        match self {
            DimExpr::Lit(_, s) | DimExpr::Sub(_, _, s) | DimExpr::Bin(.., s) => *s,
            DimExpr::Name(i) => i.span,
        }
    }

    pub fn text(&self) -> String {
        match self {
            DimExpr::Lit(n, _) => n.to_string(),
            DimExpr::Name(i) => i.name.clone(),
            DimExpr::Sub(i, k, _) => format!("{}-{k}", i.name),
            DimExpr::Bin(op, l, r, _) => {
                // Parentheses where the text would otherwise group another way.
                let sum = |d: &DimExpr| {
                    matches!(
                        d,
                        DimExpr::Sub(..) | DimExpr::Bin(DimOp::Add | DimOp::Sub, ..)
                    )
                };
                let wrap = |d: &DimExpr, paren: bool| {
                    if paren {
                        format!("({})", d.text())
                    } else {
                        d.text()
                    }
                };
                match op {
                    DimOp::Add => format!("{}+{}", l.text(), r.text()),
                    DimOp::Sub => format!("{}-{}", l.text(), wrap(r, sum(r))),
                    DimOp::Mul => format!("{}*{}", wrap(l, sum(l)), wrap(r, sum(r))),
                }
            }
        }
    }

    /// The names it mentions, in order.
    pub fn names(&self) -> Vec<&Ident> {
        match self {
            DimExpr::Lit(..) => Vec::new(),
            DimExpr::Name(i) | DimExpr::Sub(i, ..) => vec![i],
            DimExpr::Bin(_, l, r, _) => {
                let mut v = l.names();
                v.extend(r.names());
                v
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    /// `*` and `.*`
    Mul,
    /// `/` and `./`
    Div,
    /// `%` (integers)
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }

    /// Does the operator compare numbers (result `bool`)?
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-e`
    Neg,
    /// `+/e`
    Sum,
    /// `max/e`
    Max,
    /// `min/e`
    Min,
    /// `!e`
    Not,
}

impl UnOp {
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Sum => "sum",
            UnOp::Max => "maxall",
            UnOp::Min => "minall",
            UnOp::Not => "not",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal as written, and its value.
    Num {
        text: String,
        value: f64,
    },
    Name(String),
    Unary {
        op: UnOp,
        op_span: Span,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        /// The operator as written (`*` or `.*`, ...).
        op_text: &'static str,
        op_span: Span,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Call {
        callee: Ident,
        args: Vec<Expr>,
    },
    /// `(a, b, ...)`, two or more elements.
    Tuple(Vec<Expr>),
    Block(Block),
    /// `true` or `false`.
    Bool(bool),
    /// `if c { a } else { b }` (`else if` nests another `If`).
    If {
        cond: Box<Expr>,
        then: Box<Expr>,
        els: Box<Expr>,
    },
    /// `match v { p => e, ... }` on an integer or a bool.
    Match {
        scrutinee: Box<Expr>,
        arms: Vec<Arm>,
    },
    /// `s => e` or `(a, b) => e`: only as an argument of `iterate` (and the
    /// other constructs that take a step function).
    Lambda {
        param: Pattern,
        body: Box<Expr>,
    },
    /// `x[i]`, `X[i, j]`.
    Index {
        base: Box<Expr>,
        indices: Vec<Expr>,
    },
    /// `tabulate[N](i => e)`: the array of `e` for `i` in `0..N`.
    Tabulate {
        size: DimExpr,
        param: Ident,
        body: Box<Expr>,
    },
    /// `reshape[d, ...](x)`: the elements of `x`, in order, in that shape.
    Reshape {
        shape: Vec<DimExpr>,
        arg: Box<Expr>,
    },
    /// `uniform[d, ...](key)` or `normal[d, ...](key)`: random numbers of
    /// that shape from a key, and the next key.
    Draw {
        normal: bool,
        shape: Vec<DimExpr>,
        key: Box<Expr>,
    },
}

/// One arm of `match`: `p | q | ... => body`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    pub pats: Vec<Pat>,
    pub body: Expr,
    pub span: Span,
}

/// A pattern of `match`.
#[derive(Clone, Debug, PartialEq)]
pub struct Pat {
    pub kind: PatKind,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PatKind {
    /// An integer literal, possibly negative.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// `_`: anything.
    Wild,
}

impl Pat {
    /// The pattern as written.
    pub fn text(&self) -> String {
        match self.kind {
            PatKind::Int(k) => k.to_string(),
            PatKind::Bool(b) => b.to_string(),
            PatKind::Wild => "_".to_string(),
        }
    }
}

/// `{ let ...; ...; result }`
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub lets: Vec<Let>,
    pub result: Box<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Let {
    pub pattern: Pattern,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    Name(Ident),
    Tuple(Vec<Ident>, Span),
}

impl Pattern {
    /// The names bound, as written (`x` or `(a, b)`).
    pub fn text(&self) -> String {
        match self {
            Pattern::Name(i) => i.name.clone(),
            Pattern::Tuple(is, _) => {
                let n: Vec<&str> = is.iter().map(|i| i.name.as_str()).collect();
                format!("({})", n.join(", "))
            }
        }
    }

    pub fn span(&self) -> Span {
        match self {
            Pattern::Name(i) => i.span,
            Pattern::Tuple(_, s) => *s,
        }
    }
}

fn sp(s: Span) -> String {
    format!("@{}..{}", s.start, s.end)
}

fn type_text(t: &TypeExpr) -> String {
    match t {
        TypeExpr::Named { dtype, dims, .. } => {
            let mut s = dtype.name.clone();
            if !dims.is_empty() {
                let d: Vec<String> = dims.iter().map(DimExpr::text).collect();
                let _ = write!(s, "[{}]", d.join(", "));
            }
            s
        }
        TypeExpr::Tuple { elems, .. } => {
            let e: Vec<String> = elems.iter().map(type_text).collect();
            format!("({})", e.join(", "))
        }
    }
}

impl Module {
    /// A deterministic indented tree with byte spans, one node per line.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for f in &self.items {
            f.dump(&mut out);
        }
        out
    }
}

impl FnDef {
    fn dump(&self, out: &mut String) {
        let _ = writeln!(out, "fn {} {}", self.name.name, sp(self.span));
        for a in &self.attrs {
            let args: Vec<&str> = a.args.iter().map(|i| i.name.as_str()).collect();
            let _ = writeln!(
                out,
                "  attr @{}({}) {}",
                a.name.name,
                args.join(", "),
                sp(a.span)
            );
        }
        for s in &self.size_params {
            match self.bounds.iter().find(|(n, _)| n.name == s.name) {
                Some((_, b)) => {
                    let _ = writeln!(out, "  size {}: {} {}", s.name, b.name, sp(s.span));
                }
                None => {
                    let _ = writeln!(out, "  size {} {}", s.name, sp(s.span));
                }
            }
        }
        for p in &self.params {
            let _ = writeln!(
                out,
                "  param {}{}{}: {} {}",
                if p.is_static { "static " } else { "" },
                if p.is_data { "data " } else { "" },
                p.name.name,
                type_text(&p.ty),
                sp(p.span)
            );
        }
        let _ = writeln!(
            out,
            "  returns {} {}",
            type_text(&self.ret),
            sp(self.ret.span())
        );
        let _ = writeln!(out, "  body");
        self.body.dump(out, 2);
    }
}

impl Expr {
    /// Visit this expression and every expression in it, each before the
    /// ones inside it, in source order.
    pub fn walk(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        match &self.kind {
            ExprKind::Num { .. } | ExprKind::Name(_) | ExprKind::Bool(_) => {}
            ExprKind::Unary { operand, .. } => operand.walk(visit),
            ExprKind::Binary { lhs, rhs, .. } => {
                lhs.walk(visit);
                rhs.walk(visit);
            }
            ExprKind::Call { args, .. } | ExprKind::Tuple(args) => {
                for a in args {
                    a.walk(visit);
                }
            }
            ExprKind::Block(b) => {
                for l in &b.lets {
                    l.value.walk(visit);
                }
                b.result.walk(visit);
            }
            ExprKind::If { cond, then, els } => {
                cond.walk(visit);
                then.walk(visit);
                els.walk(visit);
            }
            ExprKind::Match { scrutinee, arms } => {
                scrutinee.walk(visit);
                for a in arms {
                    a.body.walk(visit);
                }
            }
            ExprKind::Lambda { body, .. }
            | ExprKind::Tabulate { body, .. }
            | ExprKind::Reshape { arg: body, .. }
            | ExprKind::Draw { key: body, .. } => body.walk(visit),
            ExprKind::Index { base, indices } => {
                base.walk(visit);
                for i in indices {
                    i.walk(visit);
                }
            }
        }
    }

    fn dump(&self, out: &mut String, depth: usize) {
        let pad = "  ".repeat(depth);
        let s = sp(self.span);
        match &self.kind {
            ExprKind::Num { text, .. } => {
                let _ = writeln!(out, "{pad}num {text} {s}");
            }
            ExprKind::Name(n) => {
                let _ = writeln!(out, "{pad}name {n} {s}");
            }
            ExprKind::Unary { op, operand, .. } => {
                let _ = writeln!(out, "{pad}{} {s}", op.name());
                operand.dump(out, depth + 1);
            }
            ExprKind::Binary {
                op,
                op_text,
                lhs,
                rhs,
                ..
            } => {
                let _ = writeln!(out, "{pad}{} `{op_text}` {s}", op.name());
                lhs.dump(out, depth + 1);
                rhs.dump(out, depth + 1);
            }
            ExprKind::Call { callee, args } => {
                let _ = writeln!(out, "{pad}call {} {s}", callee.name);
                for a in args {
                    a.dump(out, depth + 1);
                }
            }
            ExprKind::Tuple(es) => {
                let _ = writeln!(out, "{pad}tuple {s}");
                for e in es {
                    e.dump(out, depth + 1);
                }
            }
            ExprKind::Block(b) => {
                let _ = writeln!(out, "{pad}block {s}");
                for l in &b.lets {
                    let _ = writeln!(out, "{pad}  let {} {}", l.pattern.text(), sp(l.span));
                    l.value.dump(out, depth + 2);
                }
                b.result.dump(out, depth + 1);
            }
            ExprKind::Bool(b) => {
                let _ = writeln!(out, "{pad}bool {b} {s}");
            }
            ExprKind::If { cond, then, els } => {
                let _ = writeln!(out, "{pad}if {s}");
                cond.dump(out, depth + 1);
                then.dump(out, depth + 1);
                els.dump(out, depth + 1);
            }
            ExprKind::Match { scrutinee, arms } => {
                let _ = writeln!(out, "{pad}match {s}");
                scrutinee.dump(out, depth + 1);
                for a in arms {
                    let pats: Vec<String> = a.pats.iter().map(Pat::text).collect();
                    let _ = writeln!(out, "{pad}  arm {} {}", pats.join(" | "), sp(a.span));
                    a.body.dump(out, depth + 2);
                }
            }
            ExprKind::Lambda { param, body } => {
                let _ = writeln!(out, "{pad}lambda {} {s}", param.text());
                body.dump(out, depth + 1);
            }
            ExprKind::Index { base, indices } => {
                let _ = writeln!(out, "{pad}index {s}");
                base.dump(out, depth + 1);
                for i in indices {
                    i.dump(out, depth + 1);
                }
            }
            ExprKind::Tabulate { size, param, body } => {
                let _ = writeln!(out, "{pad}tabulate [{}] {} {s}", size.text(), param.name);
                body.dump(out, depth + 1);
            }
            ExprKind::Reshape { shape, arg } => {
                let d: Vec<String> = shape.iter().map(DimExpr::text).collect();
                let _ = writeln!(out, "{pad}reshape [{}] {s}", d.join(", "));
                arg.dump(out, depth + 1);
            }
            ExprKind::Draw { normal, shape, key } => {
                let d: Vec<String> = shape.iter().map(DimExpr::text).collect();
                let name = if *normal { "normal" } else { "uniform" };
                let _ = writeln!(out, "{pad}{name} [{}] {s}", d.join(", "));
                key.dump(out, depth + 1);
            }
        }
    }
}
