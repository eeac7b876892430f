//! A compile cache: compiled gradients and functions keyed by everything
//! that decides their machine code, and nothing else.
//!
//! A [`CacheKey`] keeps each component separately, so a key can be printed
//! (`egrad explain`) and two keys compared component by component
//! ([`CacheKey::diff`]):
//!
//! - **function**: the name asked for;
//! - **ir hash**: FNV-1a (64-bit) of the function's IR text *after
//!   resolution* — static arguments partially evaluated, calls inlined,
//!   element types specialized — so the hash is the function's identity;
//! - **static values**: the static arguments of the templates the function
//!   calls, as written at each call (`power(n = 20)`). The IR does not keep
//!   them apart (they are partially evaluated into it, so they are also
//!   covered by the IR hash); they are listed so a recompile can name them;
//! - **parameters**: each parameter's dtype and rank, never its sizes —
//!   one compiled program serves every size (shapes are checked at entry);
//! - **options**: λ, the saturation limits, fast-math, the rules directory,
//!   whether the e-graph runs, and the sizes the cost model prices at (they
//!   can change which program is extracted; the sizes of a *call* cannot);
//! - **backend**: the code generator's options that change machine code
//!   (SIMD loops, GEMM calls for `matmul`; not the verifier);
//! - **transform**: plain, `grad wrt [...]`, or the attribute the function
//!   carries (`@value_and_grad`, `@jvp`);
//! - **cpu features**: the host architecture and the x86 features
//!   Cranelift's native ISA builder detects.
//!
//! [`CompileCache::gradient`] and [`CompileCache::function`] return the
//! cached entry or compile, counting hits and misses; when a name is
//! compiled under a new key after an earlier one, the [`Recompile`] records
//! which components changed.

use crate::backend::{self, CompiledFunction};
use crate::call::CompiledGradient;
use crate::error::{Error, Result};
use crate::extract::cost::DEFAULT_LAMBDA;
use crate::ir::Function;
use crate::lang::ast::{ExprKind, FnDef};
use crate::pipeline::{optimize_gradient, optimize_ir, GradProgram, Options};
use crate::program::Program;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// FNV-1a, 64 bits: stable across runs, platforms and Rust versions.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A parameter as the key sees it: name, dtype and rank (not its sizes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ParamKey {
    pub name: String,
    pub dtype: String,
    pub rank: usize,
}

impl fmt::Display for ParamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} rank {}", self.name, self.dtype, self.rank)
    }
}

/// Everything that decides a compiled program, component by component.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The function compiled.
    pub function: String,
    /// FNV-1a of the resolved IR text (for a gradient: of the primal).
    pub ir_hash: u64,
    /// Static arguments at the function's calls to templates, as written.
    pub statics: Vec<String>,
    /// Each parameter's element type and shape.
    pub params: Vec<ParamKey>,
    /// λ, formatted (`{:?}` of the f64, so every distinct value differs).
    pub lambda: String,
    /// `nodes=.. iterations=.. time=..s`.
    pub limits: String,
    /// Whether the fast-math rules were on.
    pub fast_math: bool,
    /// `bundled` or the directory.
    pub rules: String,
    /// Whether the e-graph optimized (false: AD straight to the backend).
    pub optimize: bool,
    /// The sizes the cost model prices at (`N=1000`), not a call's sizes.
    pub model_sizes: String,
    /// `simd=.. gemm=.. wide=..` ([`BackendOptions`](crate::backend::BackendOptions)).
    pub backend: String,
    /// What was asked of the function (its gradient, `--wrt`, ...).
    pub transform: String,
    /// The host CPU's features the native code may use.
    pub cpu: String,
}

/// The component names, in [`CacheKey::components`] order.
pub const COMPONENTS: [&str; 13] = [
    "function",
    "ir hash",
    "static values",
    "parameters",
    "lambda",
    "limits",
    "fast-math",
    "rules",
    "optimize",
    "cost-model sizes",
    "backend",
    "transform",
    "cpu features",
];

impl CacheKey {
    /// The key of the gradient [`optimize_gradient`] makes for `options`.
    pub fn gradient(program: &Program, options: &Options) -> Result<CacheKey> {
        let name = options
            .function
            .clone()
            .ok_or_else(|| Error::Usage("no function named: use Options::function".into()))?;
        let (primal, wrt): (Function, Vec<String>) = match program.grad_spec(&name) {
            Some(spec) => {
                let wrt = spec
                    .wrt
                    .iter()
                    .filter_map(|&i| spec.primal.params.get(i))
                    .map(|p| spec.primal.var_name(p.var).to_string())
                    .collect();
                (spec.primal.clone(), wrt)
            }
            None => {
                let f = program.ir(&name)?.clone();
                let wrt = match &options.wrt {
                    Some(w) => w.clone(),
                    None => f
                        .params
                        .iter()
                        .map(|p| f.var_name(p.var).to_string())
                        .collect(),
                };
                (f, wrt)
            }
        };
        let transform = format!("grad wrt [{}] (value and gradient)", wrt.join(", "));
        Ok(CacheKey::make(program, &name, &primal, options, transform))
    }

    /// The key of a function compiled as it is (`egrad run`): its IR
    /// through the e-graph, then the backend.
    pub fn function(program: &Program, name: &str, options: &Options) -> Result<CacheKey> {
        let f = program.ir(name)?;
        let attrs: Vec<String> = fn_def(program, name)
            .map(|d| {
                d.attrs
                    .iter()
                    .map(|a| {
                        let args: Vec<&str> = a.args.iter().map(|i| i.name.as_str()).collect();
                        format!("@{}({})", a.name.name, args.join(", "))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let transform = if attrs.is_empty() {
            "plain".to_string()
        } else {
            format!("plain, of the IR {} made", attrs.join(" "))
        };
        Ok(CacheKey::make(program, name, f, options, transform))
    }

    fn make(
        program: &Program,
        name: &str,
        f: &Function,
        options: &Options,
        transform: String,
    ) -> CacheKey {
        let params = f
            .params
            .iter()
            .map(|p| {
                let ty = f.ty(p.var);
                ParamKey {
                    name: f.var_name(p.var).to_string(),
                    dtype: ty.dtype.to_string(),
                    rank: ty.shape.len(),
                }
            })
            .collect();
        let l = &options.limits;
        CacheKey {
            function: name.to_string(),
            ir_hash: fnv1a64(f.to_string().as_bytes()),
            statics: static_calls(program, name),
            params,
            lambda: format!("{:?}", options.lambda.unwrap_or(DEFAULT_LAMBDA)),
            limits: format!(
                "nodes={} iterations={} time={}s",
                l.nodes,
                l.iterations,
                l.time.as_secs_f64()
            ),
            fast_math: options.fast_math,
            rules: match &options.rules_dir {
                Some(d) => d.display().to_string(),
                None => "bundled".to_string(),
            },
            optimize: !options.no_optimize,
            model_sizes: {
                let s: Vec<String> = options
                    .dims
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if s.is_empty() {
                    "default".to_string()
                } else {
                    s.join(" ")
                }
            },
            backend: format!(
                "simd={} gemm={} wide={}",
                options.backend.simd, options.backend.gemm, options.backend.wide
            ),
            transform,
            cpu: cpu_features(),
        }
    }

    /// `(component, value)` pairs, in `COMPONENTS` order.
    pub fn components(&self) -> Vec<(&'static str, String)> {
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let values = [
            self.function.clone(),
            format!("{:016x}", self.ir_hash),
            list(self.statics.clone()),
            list(self.params.iter().map(ParamKey::to_string).collect()),
            self.lambda.clone(),
            self.limits.clone(),
            self.fast_math.to_string(),
            self.rules.clone(),
            self.optimize.to_string(),
            self.model_sizes.clone(),
            self.backend.clone(),
            self.transform.clone(),
            self.cpu.clone(),
        ];
        COMPONENTS.iter().copied().zip(values).collect()
    }

    /// The components that differ from `other`'s: `(name, other's value,
    /// this key's value)`.
    pub fn diff(&self, other: &CacheKey) -> Vec<Change> {
        self.components()
            .into_iter()
            .zip(other.components())
            .filter(|((_, a), (_, b))| a != b)
            .map(|((name, now), (_, before))| Change {
                component: name,
                before,
                now,
            })
            .collect()
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in self.components() {
            writeln!(f, "  {name}: {value}")?;
        }
        Ok(())
    }
}

/// One component that changed between two keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub component: &'static str,
    pub before: String,
    pub now: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} -> {}", self.component, self.before, self.now)
    }
}

/// A name compiled again under a different key, and why.
#[derive(Clone, Debug)]
pub struct Recompile {
    pub function: String,
    pub changes: Vec<Change>,
}

impl fmt::Display for Recompile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "recompiled `{}`:", self.function)?;
        for c in &self.changes {
            write!(f, " {c};")?;
        }
        Ok(())
    }
}

/// The host's CPU as the JIT sees it: the architecture and, on x86-64, the
/// features `cranelift_native` detects (and so may use).
pub fn cpu_features() -> String {
    #[allow(unused_mut)]
    let mut features: Vec<&str> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => {
                $( if std::is_x86_feature_detected!($f) { features.push($f); } )*
            };
        }
        detect!(
            "sse3",
            "ssse3",
            "sse4.1",
            "sse4.2",
            "popcnt",
            "avx",
            "avx2",
            "bmi1",
            "bmi2",
            "lzcnt",
            "fma",
            "avx512f",
            "avx512vl",
            "avx512dq",
            "avx512bitalg",
            "avx512vbmi"
        );
    }
    if features.is_empty() {
        std::env::consts::ARCH.to_string()
    } else {
        format!("{} {}", std::env::consts::ARCH, features.join(" "))
    }
}

/// The definition of `name` in the program's syntax tree.
fn fn_def<'a>(program: &'a Program, name: &str) -> Option<&'a FnDef> {
    program.ast().items.iter().find(|d| d.name.name == name)
}

/// The static arguments at `name`'s direct calls to functions with static
/// parameters, as written: `power(n = 20)`.
pub fn static_calls(program: &Program, name: &str) -> Vec<String> {
    let Some(def) = fn_def(program, name) else {
        return Vec::new();
    };
    let text = &program.file().text;
    let mut out = Vec::new();
    def.body.walk(&mut |e| {
        if let ExprKind::Call { callee, args } = &e.kind {
            if let Some(t) = fn_def(program, &callee.name) {
                let shown: Vec<String> = t
                    .params
                    .iter()
                    .zip(args)
                    .filter(|(p, _)| p.is_static)
                    .map(|(p, a)| {
                        let src = text
                            .get(a.span.start as usize..a.span.end as usize)
                            .unwrap_or("?");
                        format!("{} = {}", p.name.name, src.trim())
                    })
                    .collect();
                if !shown.is_empty() {
                    let call = format!("{}({})", callee.name, shown.join(", "));
                    if !out.contains(&call) {
                        out.push(call);
                    }
                }
            }
        }
    });
    out
}

/// A cached compiled program.
///
/// Shared (`Rc`), not copied. The JIT's `CompiledFunction` is not
/// `Send`/`Sync` (its `JITModule` is not), so the cache is single-threaded
/// (`&mut self`); sharing compiled code across threads is future work.
#[derive(Clone)]
pub enum Compiled {
    Gradient(Rc<CompiledGradient>),
    Function(Rc<CompiledFunction>),
}

/// Compiled programs by [`CacheKey`], with hit and miss counts and the
/// reasons for recompiles.
#[derive(Default)]
pub struct CompileCache {
    entries: HashMap<CacheKey, Compiled>,
    /// The last key each name was compiled under.
    last: HashMap<String, CacheKey>,
    hits: usize,
    misses: usize,
    recompiles: Vec<Recompile>,
}

impl CompileCache {
    pub fn new() -> CompileCache {
        CompileCache::default()
    }

    pub fn hits(&self) -> usize {
        self.hits
    }

    pub fn misses(&self) -> usize {
        self.misses
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every compile of a name already compiled under another key.
    pub fn recompiles(&self) -> &[Recompile] {
        &self.recompiles
    }

    /// The latest recompile, if any.
    pub fn last_recompile(&self) -> Option<&Recompile> {
        self.recompiles.last()
    }

    /// The compiled gradient for `options` (see [`optimize_gradient`]),
    /// compiled on a miss.
    pub fn gradient(
        &mut self,
        program: &Program,
        options: &Options,
    ) -> Result<Rc<CompiledGradient>> {
        let key = CacheKey::gradient(program, options)?;
        match self.get_or_compile(key, || {
            let g: GradProgram = optimize_gradient(program, options)?;
            Ok(Compiled::Gradient(Rc::new(
                g.compile_with(&options.backend)?,
            )))
        })? {
            Compiled::Gradient(g) => Ok(g),
            Compiled::Function(_) => Err(Error::internal("cache: a function under a gradient key")),
        }
    }

    /// The compiled function `name` (its IR through the e-graph, then the
    /// backend, as `egrad run` does), compiled on a miss.
    pub fn function(
        &mut self,
        program: &Program,
        name: &str,
        options: &Options,
    ) -> Result<Rc<CompiledFunction>> {
        let key = CacheKey::function(program, name, options)?;
        match self.get_or_compile(key, || {
            let f = program.ir(name)?;
            let opt = optimize_ir(f, options)?;
            Ok(Compiled::Function(Rc::new(backend::compile(
                &opt.after,
                &options.backend,
            )?)))
        })? {
            Compiled::Function(f) => Ok(f),
            Compiled::Gradient(_) => Err(Error::internal("cache: a gradient under a function key")),
        }
    }

    /// The entry under `key`, or `compile()`'s result stored under it.
    pub fn get_or_compile(
        &mut self,
        key: CacheKey,
        compile: impl FnOnce() -> Result<Compiled>,
    ) -> Result<Compiled> {
        if let Some(c) = self.entries.get(&key) {
            self.hits += 1;
            self.last.insert(key.function.clone(), key);
            return Ok(c.clone());
        }
        let compiled = compile()?;
        self.misses += 1;
        if let Some(before) = self.last.get(&key.function) {
            self.recompiles.push(Recompile {
                function: key.function.clone(),
                changes: key.diff(before),
            });
        }
        self.last.insert(key.function.clone(), key.clone());
        self.entries.insert(key, compiled.clone());
        Ok(compiled)
    }
}

/// What `egrad explain` prints for a function: the key, what is static and
/// what is dynamic, and for a gradient the residuals and why.
pub fn explain(program: &Program, name: &str, options: &Options) -> Result<String> {
    let is_grad = program.grad_spec(name).is_some() || options.wrt.is_some();
    let key = if is_grad {
        CacheKey::gradient(program, &options.clone().function(name))?
    } else {
        CacheKey::function(program, name, options)?
    };
    let mut out = format!("cache key of `{name}`:\n{key}");
    out.push_str("static (baked into the IR, part of the ir hash):\n");
    if key.statics.is_empty() {
        out.push_str("  no static arguments\n");
    } else {
        for s in &key.statics {
            out.push_str(&format!("  {s}\n"));
        }
    }
    out.push_str("dynamic (checked at entry; sizes are not part of the key):\n");
    for p in &key.params {
        out.push_str(&if p.rank == 0 {
            format!("  {}: {} scalar, value dynamic\n", p.name, p.dtype)
        } else {
            format!(
                "  {}: {}, rank {}, sizes and values dynamic\n",
                p.name, p.dtype, p.rank
            )
        });
    }
    if is_grad {
        let g = optimize_gradient(program, &options.clone().function(name))?;
        let sizes: Vec<String> = g.sizes().iter().map(|(p, n)| format!("{p}={n}")).collect();
        out.push_str(&format!(
            "residuals (λ = {}{}):\n",
            key.lambda,
            if sizes.is_empty() {
                String::new()
            } else {
                format!(", priced at {}", sizes.join(", "))
            }
        ));
        for line in g.residuals.to_string().lines() {
            out.push_str(&format!("  {line}\n"));
        }
        let choices = &g.optimized.residual_choices;
        if choices.is_empty() {
            out.push_str("  no store-or-recompute choices (the e-graph did not run or the pullback reads no primal value)\n");
        }
        for c in choices {
            let why = match c.other {
                Some(d) if c.stored => format!("recomputing instead: program cost {d:+}"),
                Some(d) => format!("storing instead: program cost {d:+}"),
                None => "no other choice".to_string(),
            };
            out.push_str(&format!(
                "  %{}: {} {} ({} bytes, cost {}; {why})\n",
                c.name,
                c.ty,
                if c.stored { "stored" } else { "recomputed" },
                c.bytes,
                c.cost
            ));
        }
    }
    Ok(out)
}
