//! The fuzzer's functions with their own derivative rules (`@custom_vjp`,
//! `@custom_jvp`): a primitive and its rules, random but linear where a
//! rule must be (part of `gen.rs`, whose generator it extends).

use super::*;

impl Gen<'_> {
    /// The type of a float of `shape` in this function's float type.
    fn float_ty(&self, shape: Shape) -> String {
        let fl = self.float;
        match shape {
            Scalar => fl.to_string(),
            VecN => format!("{fl}[N]"),
            VecM => format!("{fl}[M]"),
            Matrix => format!("{fl}[N, M]"),
        }
    }

    /// A coefficient of a rule: `tanh` of a leaf, or two of them combined.
    /// (Nothing that indexes: a rule that fails where the primal does not,
    /// an index out of range, would make the gradient program fail where
    /// the function does not, which is no bug. And finite: unoptimized, a
    /// rule multiplies the tangent of an inactive parameter as a real 0,
    /// which the optimizer takes for a symbolic zero, absorbing a NaN
    /// coefficient; see `tests/random_programs.rs`.)
    fn coef(&mut self, shape: Shape) -> String {
        let a = self.leaf(shape);
        match self.rng.below(4) {
            0 => format!("tanh({a})"),
            1 => format!("abs(tanh({a}))"),
            _ => {
                let op = self.rng.pick(&["+", "-", "*", ".*"]);
                let other = if self.rng.chance(0.3) { Scalar } else { shape };
                let b = self.leaf(other);
                format!("(tanh({a}) {op} tanh({b}))")
            }
        }
    }

    /// `coef * t` of shape `to` for `t` of shape `from` (summed or
    /// broadcast where the shapes differ): linear in `t`.
    fn linear(&mut self, t: &str, from: Shape, to: Shape) -> String {
        if from == to || from == Scalar {
            let c = self.coef(to);
            format!("({c}) * {t}")
        } else if to == Scalar {
            let c = self.coef(from);
            format!("+/(({c}) * {t})")
        } else {
            let c = self.coef(to);
            format!("({c}) * +/{t}")
        }
    }

    /// A function with its own derivative rules: `@custom_vjp(NAME_vjp)`,
    /// `@custom_jvp(NAME_jvp)` or both on `fn pK[N, M](...)`, whose float
    /// parameters and result have any shape (and sometimes an `i64`
    /// parameter, which has no cotangent), and its rules: the VJP takes
    /// the parameters and the cotangent `g` and returns one cotangent per
    /// float parameter (a tuple if several), the JVP takes the parameters
    /// and a tangent per float parameter; both random expressions linear
    /// in `g` or the tangents (so not the derivative: only the pipeline is
    /// checked). Now and then, on purpose: a static parameter, a rule
    /// missing, of the wrong type or arity, not linear, or calling the
    /// primitive. Returns its name, text and (for a scalar result)
    /// parameter shapes.
    pub(super) fn primitive(&mut self, index: usize) -> (String, String, Vec<Option<Shape>>) {
        let name = format!("p{index}");
        self.float = if self.rng.chance(0.8) { "f64" } else { "f32" };
        let odd = |g: &mut Self| g.rng.chance(0.04);
        let mut params: Vec<(String, Option<Shape>)> = Vec::new();
        for k in 0..self.rng.range(1, 4) {
            let shape = match self.rng.below(9) {
                0..=2 => Some(VecN),
                3 => Some(VecM),
                4 => Some(Matrix),
                5 if self.rng.chance(0.5) => None,
                _ => Some(Scalar),
            };
            let pname = match shape {
                Some(Matrix) => format!("A{k}"),
                None => format!("k{k}"),
                _ => format!("x{k}"),
            };
            params.push((pname, shape));
        }
        let has = |s: Shape| params.iter().any(|p| p.1 == Some(s));
        if !(has(Matrix) || has(VecN) && has(VecM)) {
            params.push(("A9".into(), Some(Matrix)));
        }
        self.ints = params
            .iter()
            .filter(|p| p.1.is_none())
            .map(|p| p.0.clone())
            .collect();
        self.statik = false;
        let base: Vec<(String, Shape)> = params
            .iter()
            .map(|(n, s)| match s {
                Some(s) => (n.clone(), *s),
                None => (self.to_float(n), Scalar),
            })
            .collect();
        let mut ptext: Vec<String> = params
            .iter()
            .map(|(n, s)| match s {
                Some(s) => format!("{n}: {}", self.float_ty(*s)),
                None => format!("{n}: i64"),
            })
            .collect();
        let statik = odd(self);
        if statik {
            ptext.insert(0, "static c: i64".into());
        }
        let ret = [Scalar, Scalar, Scalar, VecN, VecM, Matrix][self.rng.below(6)];
        let rty = self.float_ty(ret);
        self.vars = base.clone();
        let body = self.expr(ret);
        let floats: Vec<(String, Shape)> = params
            .iter()
            .filter_map(|(n, s)| s.map(|s| (n.clone(), s)))
            .collect();
        let sig = ptext.join(", ");
        let call = {
            let args: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
            let c = if statik { "1, " } else { "" };
            let call = format!("{name}({c}{})", args.join(", "));
            if ret == Scalar {
                call
            } else {
                format!("+/{call}")
            }
        };
        let p = PrimSig {
            name: &name,
            sig: &sig,
            ptext: &ptext,
            ret,
            rty: &rty,
            call: &call,
            floats: &floats,
            base: &base,
        };
        // The VJP: `g` then a cotangent per float parameter.
        let vjp = self.primitive_vjp(&p);
        // The JVP: a tangent per float parameter.
        let jvp = self.primitive_jvp(&p);
        let rules = self.rng.below(3);
        let mut text = String::new();
        if rules != 1 {
            text.push_str(&format!("@custom_vjp({name}_vjp)"));
        }
        if rules != 0 {
            if !text.is_empty() {
                text.push_str(if self.rng.chance(0.5) { " " } else { "\n" });
            }
            text.push_str(&format!("@custom_jvp({name}_jvp)"));
        }
        text.push_str(&format!("\nfn {name}[N, M]({sig}) -> {rty} = {body}\n"));
        // The rules named, now and then one missing (on purpose).
        let missing = odd(self);
        if rules != 1 && !(missing && rules == 0) {
            text.push_str(&format!("{vjp}\n"));
        }
        if rules != 0 && !(missing && rules == 1) {
            text.push_str(&format!("{jvp}\n"));
        }
        self.vars = base;
        let shapes = params.iter().map(|p| p.1).collect();
        (
            name,
            text,
            if ret == Scalar && !statik {
                shapes
            } else {
                Vec::new()
            },
        )
    }
    /// A primitive's VJP rule: `g` then a cotangent per float parameter
    /// (now and then, on purpose, one missing, a call of the primitive, or
    /// a cotangent of the wrong type).
    fn primitive_vjp(&mut self, p: &PrimSig) -> String {
        let odd = |g: &mut Self| g.rng.chance(0.04);
        self.vars = p.base.to_vec();
        let mut outs: Vec<String> = p
            .floats
            .iter()
            .map(|(_, s)| self.linear("g", p.ret, *s))
            .collect();
        let mut tys: Vec<String> = p.floats.iter().map(|(_, s)| self.float_ty(*s)).collect();
        if odd(self) && !outs.is_empty() {
            // On purpose: a cotangent missing.
            outs.pop();
            tys.pop();
        }
        if odd(self) && !outs.is_empty() {
            // On purpose: calling the primitive.
            let c = p.call.to_string();
            outs[0] = format!("{} + 0 * {c}", outs[0]);
        }
        let (ret_ty, value) = if outs.len() == 1 {
            (tys[0].clone(), outs[0].clone())
        } else {
            (
                format!("({})", tys.join(", ")),
                format!("({})", outs.join(", ")),
            )
        };
        let gty = if odd(self) {
            let s = self.rng.pick(&SHAPES);
            self.float_ty(s)
        } else {
            p.rty.to_string()
        };
        format!(
            "fn {}_vjp[N, M]({}, g: {gty}) -> {ret_ty} = {value}",
            p.name, p.sig
        )
    }

    /// A primitive's JVP rule: a tangent per float parameter (now and
    /// then, on purpose, not linear, calling the primitive, or a tangent
    /// missing).
    fn primitive_jvp(&mut self, p: &PrimSig) -> String {
        let odd = |g: &mut Self| g.rng.chance(0.04);
        self.vars = p.base.to_vec();
        let mut tans = Vec::new();
        let mut terms = Vec::new();
        for (n, s) in p.floats {
            let t = format!("d{n}");
            tans.push(format!("{t}: {}", self.float_ty(*s)));
            terms.push(self.linear(&t, *s, p.ret));
        }
        if odd(self) && !p.floats.is_empty() {
            // On purpose: not linear in the tangents.
            let (n, s) = &p.floats[0];
            terms.push(self.linear(&format!("(d{n} * d{n})"), *s, p.ret));
        }
        if odd(self) {
            // On purpose: calling the primitive.
            terms.push(format!("0 * {}", p.call));
        }
        if odd(self) {
            tans.pop();
        }
        if terms.is_empty() {
            terms.push(self.coef(p.ret));
        }
        let mut all = p.ptext.to_vec();
        all.extend(tans);
        format!(
            "fn {}_jvp[N, M]({}) -> {} = {}",
            p.name,
            all.join(", "),
            p.rty,
            terms.join(" + ")
        )
    }
}

/// What a primitive's rules are written against.
struct PrimSig<'a> {
    name: &'a str,
    /// The parameters as written.
    sig: &'a str,
    /// Each parameter as written.
    ptext: &'a [String],
    ret: Shape,
    rty: &'a str,
    /// A call of the primitive, reduced to a scalar.
    call: &'a str,
    floats: &'a [(String, Shape)],
    /// The variables in scope in its body.
    base: &'a [(String, Shape)],
}
