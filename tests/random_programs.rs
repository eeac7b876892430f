//! Random well-typed programs, checked end to end.
//!
//! A seeded generator writes small `.eg` programs (as source text) over the
//! language as it is: scalars, vectors `f64[N]`, `f64[N-1]`, `f64[M]` and
//! matrices `f64[N, M]` (and their transposes and products), sometimes with
//! literal sizes; arithmetic with scalar and row broadcasting; math
//! functions on arguments kept in their domain (`log`/`sqrt` of `1 + x*x`,
//! `exp` of bounded values, `pow(1 + x*x, 1.5)`, `sqrt`/`log` behind an `if`
//! whose untaken branch is NaN); `max`/`min`/`abs`; the reductions; `let`
//! and blocks; dynamic `if` with comparisons and `&&`/`||`/`!`; `iterate`
//! (with tuple states, and static counts passed to templates),
//! `iterate_until`, and long `iterate`s that egrad runs as real loops (see
//! below); static `i64`, `f64` and `bool` parameters; `tabulate`
//! with `x[i]`, `x[i + 1]` (over `N`, `N-1`, `N-2`, `M`, 2), rows of
//! matrices, columns `X[i, k]` and `A[i + 1, k]` (static `k`),
//! matrix-vector products and `max/`/`min/` of rows; static indices;
//! `matmul`; `transpose`; helper functions, in any order, some of them
//! generic over the element type (`fn h[T, N](v: T[N], a: T) -> T`, so
//! the `f32` copy specializes them to `f32`), some of them `@grad`,
//! `@value_and_grad` or `@jvp` functions. Every value is kept bounded
//! (wrapped in `tanh` or scaled by a power of two where it could grow), so
//! nothing overflows. Each program has a scalar `loss`, `dloss = @grad(...)`
//! of a random subset of its parameters in a random order, often
//! `vg = @value_and_grad(...)` and `jv = @jvp(...)`, and, when the loss has
//! a scalar parameter `s`, `d1 = @grad(s) loss`, `d2 = @grad(s) d1`,
//! often `hv = @jvp(s) d1`, and the third derivatives `d3 = @grad(s) d2`
//! and `t3 = @grad(s) hv` (checked against finite differences of `d2` and
//! `hv`). Every function is also optimized with `--fast-math` and compared
//! with the strict result (1e-9 relative, see `tests/fast_math.rs`).
//!
//! About a fifth of the programs (`EGRAD_RANDOM_LOOPS`) have loops: long
//! `iterate`s, which egrad lowers to an IR loop (`loop`) instead of
//! unrolling them, as the value of a `let` of the loss, inside its
//! expressions and in helpers. Their states are a scalar, a tuple of
//! scalars, a vector (summed where a scalar is wanted) or a tuple of
//! vectors; each component relaxes towards a generated value
//! (`q + h * (f - q)`, `q - h * (q - f)`) or drifts by at most count × h
//! (`q + h * tanh(f)`), so that nothing blows up or vanishes however long
//! the loop. A step reads from outside only what a loop can carry with its
//! state (values of the state's type, and scalars next to a vector state:
//! parameters, lets, the state of an enclosing loop), and sometimes runs a
//! loop itself. The count is chosen once the program has been lowered with
//! a long count and the step weighed: count × statements of the step just
//! past `UNROLL_STMTS` (count × h is 0.5, 1 or 2), so a loop costs little to
//! run (a program whose loops nest and would execute more than
//! `NESTED_COST` statements per evaluation is generated again without
//! nesting). A helper with a loop is not called inside `tabulate` or a
//! loop's step, and no derivative helper differentiates it (the loss's
//! gradient would then be a second derivative through a loop). Without
//! loops a seed gives the program it gave before loops were generated.
//!
//! A third of the loop programs have a run-time count: the loss's last
//! parameter is `n: i64`, and most of its long `iterate`s that are not
//! inside a loop and run none write `n` as their count (their step size h
//! is made for a count drawn from 40 to 120, the largest the check runs,
//! so count × h stays at most 0.5, 1 or 2); some helpers with a loop take
//! `n: i64` first, and are called with `n` or with a literal count (0, 1, 3
//! or that largest count). Derivatives never take `n`: `dloss`, `vg`,
//! `jv`, `d1`, `d2` and `hv` pass it along, their `wrt` and the finite
//! differences leave it alone.
//!
//! A fifth of the programs (`EGRAD_RANDOM_NEW`) also have the newer
//! constructs, drawn from a stream of their own (without them a seed gives
//! the program it gave before they were generated):
//!
//! - `scan(xs, init, (q, e) => step)`: loops over the rows of a sequence,
//!   a vector (scalar rows) or a matrix (vector rows), sometimes
//!   transposed, reversed or mapped (`tanh(xs * 2)`), with a scalar, a
//!   vector (summed for a scalar) or a tuple state (taken apart with
//!   `let (a, b) = q` in the step, a vector and a scalar or two of one
//!   type). Such a scan is a loop, and egrad does not differentiate with
//!   respect to its sequence: the sequences are parameters of the loss of
//!   their own, `xs: f64[N]` and `Xs: f64[N, M]`, that no derivative
//!   takes (`dloss`, `vg` and `jv` leave them out; `d1`, `d2` and `hv`
//!   take only `s`), and that the rest of the loss may read too. Like a
//!   loop's step, a scan's step reads from outside only what a loop
//!   carries along its state, and always its row; each component relaxes
//!   or drifts as in a loop. With literal sizes some scans have a state
//!   no loop can carry (two vectors of different lengths): egrad unrolls
//!   them, and their sequence is then any value, often of differentiated
//!   parameters. A scan is not written inside `tabulate`; in the step of
//!   a loop (not itself inside a loop's step), its sequence is one the
//!   loop carries (`xs` next to a state of its type; see below for the
//!   derivatives of such programs).
//! - `reverse(a)` of vectors and matrices (and `reverse(a)[k]`),
//!   `reverse(x)[i]` inside `tabulate`, and `concat` of a part of integer
//!   length 1 or 2 (`tabulate[1](i => ...)`) and one of length `N-1`,
//!   `N-2` or `M-1` (a `tabulate`, or any `f64[N-1]`), in either order,
//!   vectors or rows of matrices; both only on values that do not depend
//!   on the index of an enclosing `tabulate`, also in loops' steps and
//!   helpers.
//! - a helper recursing through a static depth:
//!   `fn h[N](static k: i64, v: f64[N], a: f64) -> T = if k == 0 { ... }
//!   else { let r = h(k - 1, ...); ... }` (`k` sometimes also a number in
//!   its body), called by the loss with a literal depth from 1 to 4.
//!
//! The test prints how many programs have each and how often each is
//! written, and how many losses run a scan (a loop over a sequence) in
//! their IR.
//!
//! Three tenths of the programs (`EGRAD_RANDOM_INTS`) have run-time
//! integers, drawn from a stream of their own too (without them a seed
//! gives the program it gave before they were generated):
//!
//! - `i64` parameters of the loss after the others (before `n`): scalar
//!   indices `k` (along `N`) and `j` (along `M`), and index arrays `ix:
//!   i64[N]`, `iy: i64[M]` (along `N`) and `jx: i64[N]` (along `M`), whose
//!   values the check draws in range (`inputs`, by name); no derivative
//!   takes them, and finite differences leave them alone;
//! - integer arithmetic on them (`+ - * / %`, `max`, `min`, `abs`, `if` on
//!   integer comparisons), integers from floats as `i64(tanh(e) * c)`, and
//!   `f64(...)` of integers (scalars and index arrays) in float
//!   expressions; every integer stays far from 2^53 whatever the float
//!   inputs (see below);
//! - run-time indices always in range: a parameter, `ix[c]`, an integer
//!   `% len` or clamped with `min(max(e, 0), len - 1)` (`len` the length
//!   known for sure: 2 for `N`, 1 for `M`, or the literal size), also
//!   `i64(...)` of a float; index arrays are parameters or arithmetic on
//!   them brought back in range the same ways;
//! - on differentiated float values: `x[k]`, `A[a, b]` with a run-time
//!   index in either position or both, rows `A[k]`, gathers `x[idx]` and
//!   `A[idx]`, `tabulate[L](i => x[idx[i]] ...)` (sometimes `+
//!   f64(idx[i])`), `scatter_add(x, idx, rows)` of elements or of matrix
//!   rows (or a number), and `if` on integer conditions (element-wise on an
//!   index array too);
//! - sometimes a helper with an `i64` result `fn h[N](v: f64[N], k: i64)
//!   -> i64`, called with a parameter or a literal for `k`.
//!
//! One let of such a loss is mostly a gather, a `scatter_add` or a
//! `tabulate` over an index array; in a release run at least 5% of all
//! programs must have gathers, `scatter_add` and integer arithmetic each
//! (the test prints how many have each group of these constructs). None
//! is written in a loop's or a scan's step (it reads only what a loop
//! carries). Truncation (`i64(e)`) is a kink: inputs are drawn away from
//! `e` crossing a nonzero integer, and integer comparisons, `max`, `min`
//! and `abs` are none.
//!
//! 15% of the programs (`EGRAD_RANDOM_SEQ`) have sequences of a length
//! of their own and loops with a run-time bound, drawn from a stream of
//! their own as well (without them a seed gives the program it gave
//! before they were generated), each a let of the loss:
//!
//! - `scan(zs, init, (q, e) => step)` over a sequence parameter of the loss
//!   whose length is a size parameter `L` of its own (drawn from 0 to 5,
//!   so some sequences are empty): `zs: f64[L]` (scalar rows) or `Zs:
//!   f64[L, B]` (rows `f64[B]`, `B` being `M` or `N`), as it is or mapped
//!   (`tanh(zs * 2)`, `sin(zs)`, `reverse(zs)`, or `zs * tanh(v)` with a
//!   scalar `v` from outside); its step is a loop's (as for the scans
//!   above: it reads its row, the state and what a loop carries, such as
//!   scalar parameters next to a vector state, and relaxes or drifts), with
//!   a scalar, vector or tuple state;
//! - `scan_all(...)` of the same kind, every state after a step stacked
//!   (`L` rows; a tuple of such arrays for a tuple state), summed, squared
//!   and summed (`+/(p .* p)`) or summed through `tanh`, component by
//!   component;
//! - `iterate_until(u, init, qd => done, q => step)` with a run-time bound
//!   `u: i64`, a parameter of the loss after the integer ones (before
//!   `n`), whose value the check draws from 0 to 7 (`inputs`); the step is
//!   a loop's (a scalar or vector state, relaxing or drifting), and `done`
//!   a threshold on the state, its sum or its magnitude (element-wise for
//!   a vector) or any generated condition: the loop stops where the data
//!   say. Its IR must have a loop counted by `u`.
//!
//! Unlike `xs` and `Xs`, the sequences `zs` and `Zs` are differentiated:
//! `dloss` and `vg` take one of them in most of these programs, and
//! finite differences check every element of their gradient. Forward mode
//! with respect to such a sequence is not supported (egrad says so), so
//! one drawn among `jv`'s parameters is left out of them (and `jv` with it
//! if nothing is left), and counted. Where a sequence is scaled by a value
//! `jv`, `d2` or `hv` differentiate in forward mode, or where a `scan_all`
//! makes forward mode go through its tape's gradient (`d2`, `hv`), egrad
//! refuses these functions (documented limits); they are then left out and
//! counted by reason (`refused_forward`). The test prints how many
//! programs have each construct, the lengths drawn and how many gradients
//! with respect to a sequence were checked; in a release run at least 3%
//! of the programs must have each construct, run a `scan_all` loop and a
//! loop counted by `u` in the loss's IR, and check a gradient with respect
//! to a sequence, and some must check one of an empty sequence.
//!
//! A fifth of the programs (`EGRAD_RANDOM_NEST`) have nested `tabulate`s
//! or indexed stacks (most both), drawn from a stream of their own too
//! (without them a seed gives the program it gave before they were
//! generated):
//!
//! - nested `tabulate`s, two levels mostly and three sometimes (a third
//!   summed in the inner body, `+/tabulate[..](k => ...)`, or the element
//!   of a rank-3 result): outside any `tabulate`, `+/flatten(tabulate[N](i
//!   => tabulate[M](j => e)))`, `+/` of row sums `tabulate[N](i =>
//!   +/tabulate[M](j => e))` (that vector also where one is wanted), or
//!   the `f64[N, M]` matrix itself where the generator wants a matrix; and
//!   inside the body of a `tabulate`, `+/tabulate[L](j => e)` for a scalar
//!   or `tabulate[c](j => e)` for a row `f64[c]`. Their lengths are `N`,
//!   `M`, `N-1` or 2. The outer body sometimes has lets (mostly values of
//!   `i`, scalars or rows) that the inner body reads (`u`, or `u[j]` of a
//!   row: a stack indexed by the inner index); the inner body reads arrays
//!   along either index (`x[i]`, `y[j]`, `A[i]`, at offsets `x[j + 1]`),
//!   elements along both (`A[i, j]`, `A[j, i]`, `A[i][j]`, `transpose(A)[j,
//!   i + 1]`, where shapes fit), the indices as numbers (`f64(i) * 0.25`),
//!   `+/` of rows, anything the generator writes in a `tabulate`'s body,
//!   and is sometimes under an `if` on a comparison of the indices (`j <=
//!   i`, `i != j`, `j % 2 == 0`, `i + j >= 2`);
//! - indexing a stack (a row that depends on the index of the enclosing
//!   `tabulate`, of any level: an expression of `X[i]`, or a vector from
//!   outside times a value of `i`) in a `tabulate`'s body: `(e)[c]` with a
//!   static `c` in range, `(e)[i]` with the index of a `tabulate` whose
//!   length is at most the row's, `(e)[k]` with a run-time index in range
//!   (in the programs with run-time integers, as for `x[k]` above) and
//!   `(e)[ix[i]]` with an index array whose values index the row; written
//!   at random in `tabulate` bodies, and as a let of the loss (a
//!   `tabulate` whose body indexes a stack).
//!
//! A program drawn with them has a let of the loss that is a nested
//! `tabulate`, one that is a `tabulate` indexing a stack, or (most) both
//! (where one fits; drawn in their stream). The test prints
//! how many programs have a nested `tabulate` and an indexed stack, and
//! how many have each form; in a release run at least 5% of the programs
//! must have a nested `tabulate`, and 5% an indexed stack. Like the
//! run-time integers, none of these reads in a loop's or a scan's step
//! what a loop does not carry (an index array there).
//!
//! 8% of the programs (`EGRAD_RANDOM_MATCH`) have `match`, drawn from a
//! stream of its own too (without it a seed gives the program it gave
//! before it was generated), anywhere the generator writes an expression
//! (in the loss, helpers, `tabulate` bodies, loops' steps) and as a let
//! of the loss:
//!
//! - at run time, selecting element by element like `if` (the gradient
//!   flows through the arm taken only): on a comparison (`match x > s {
//!   true => ..., false => ... }`, or `_` for the second); on an integer
//!   from a float, `{ let u = e; match i64(tanh(u) * 2.5) { 1 | 2 =>
//!   sqrt(u), -1 | -2 => log(-u), _ => u * 0.5 } }`, whose arms are NaN
//!   where they are not taken; on parameters of the loss of their own,
//!   after the integer ones (`kind: i64[N]`, whose values the check draws
//!   from -1 to 3, `mode: i64`, a count to egrad, from 0 to 3, `robust:
//!   bool`, `mask: bool[N]`; no derivative takes them, and no loop's step
//!   reads them); on integer expressions and index arrays (with run-time
//!   integers). Patterns are groups of the values (`0`, `1 | 2`, `-1`) and
//!   a last `_`; on `kind` and `mode`, sometimes an arm of values never
//!   drawn (`7`, `-5 | 9`) is NaN everywhere. Arms have the type of the
//!   `match`, or are numbers or scalars it broadcasts (see the open bugs
//!   below for where);
//! - static, picking one arm at compile time: on a literal or a static
//!   expression (`match 2 * 1 - 1 { ... }`, `match 1 < 2 { ... }`), whose
//!   other arms (unchecked) are leaves, sometimes of another type; on the
//!   static count `n` of a helper (`match n { 0 => ..., _ => ... }` in an
//!   `iterate(n, ...)`); in a helper `fn h[N](static c: i64, v: f64[N], a:
//!   f64) -> T = match c { 0 => ..., 1 | 2 => ..., _ => ... }` (or `static
//!   flag: bool`) that the loss calls with 0 to 3 (`true`, `false`);
//! - a helper `fn h[N](kind: i64[N], v: f64[N]) -> f64[N] = match kind {
//!   ... }` the loss calls with its `kind`.
//!
//! 8% of the programs (`EGRAD_RANDOM_KEYS`) draw random numbers from keys,
//! from a stream of their own as well: one or two lets of the loss `let
//! (z, k) = normal[N](key)` (or `uniform[...]`, of `f64[N]`, `f64[N-1]`,
//! `f64[M]` or `f64[N, M]`) from a key: `random_key(c)` of a literal (one
//! past 2^32 too), `random_key(seed)` of a run-time `seed: i64` (a count,
//! drawn from 0 to 999), a parameter `key: i64[2]` (two words below 2^32),
//! a key an earlier draw gave, or one of the pair `split` gives. The
//! numbers are bounded (|z| < 6.7, u in [0, 1)) and stay in scope; often
//! the next let uses them: noise added (`x + 0.1 * z`), a
//! reparameterised sample (`x + tanh(y) * z`), a dropout mask (`if u <
//! 0.2 { 0 } else { x * 1.25 }`). Anywhere an expression is written,
//! `({ let (z, k) = normal[..](key); e + 0.1 * z })` (or `e * (1 + 0.1 *
//! z)`, a dropout mask; `[2]` and `z[0]` for a scalar) from a key in
//! scope, or a literal one in loops' steps; sometimes a helper `fn h[N](v:
//! f64[N], a: f64, kk: i64[2]) -> T` draws from the key it is passed. The
//! loss at its fixed keys is differentiated like any other (keys have no
//! derivative, finite differences leave them alone).
//!
//! The test prints how many programs have each form of `match` and each
//! use of keys, and how many of those with a run-time `match` and with
//! noise had their gradient checked against finite differences; in a
//! release run at least 3% of the programs must have a run-time `match`
//! (2% a static one), 3% noise drawn from a key, and 3% each such a
//! gradient checked.
//!
//! 7% of the programs (`EGRAD_RANDOM_CUSTOM`) have user primitives with
//! their own derivative rules, drawn from a stream of their own too
//! (without them a seed gives the program it gave before they were
//! generated): one or two functions `prK` with `@custom_vjp(prK_vjp)`,
//! `@custom_jvp(prK_jvp)` or both (a third each), whose body applies an
//! element-wise `f` (`sin`, `tanh`, a square, softplus `log1p(exp(x))`
//! or its stable form `max(x, 0) + log1p(exp(-abs(x)))`, whose kinks
//! cancel, `exp(-x * x)`, `x * tanh(x)`) and whose rules are its
//! derivative written out (sometimes naming it in a `let`):
//!
//! - element-wise, `fn prK(x: f64) -> f64 = f(x)` of a scalar, a vector
//!   `f64[N]` or a matrix `f64[N, K]`: `prK_vjp(x, g) = g * f'(x)`,
//!   `prK_jvp(x, dx) = f'(x) * dx`;
//! - two parameters, `fn prK[N](x: f64[N], a: f64) -> f64[N] = a * f(x) +
//!   sin(a)`: the VJP returns a tuple `(g * a * f'(x), +/(g * f(x)) +
//!   cos(a) * +/g)`, the JVP takes `dx` and `da`;
//! - reductions to a scalar, `+/f(x)` of a vector or a matrix, and
//!   `fn prK[N](x: f64[N], a: f64) -> f64 = +/f(a * x)` (a tuple VJP;
//!   derivative helpers may differentiate it directly).
//!
//! With one rule egrad makes the other by transposition, so reverse and
//! forward mode (`jv`), second derivatives (`d2`, `hv`) and derivative
//! helpers (`@grad` of a helper calling one: the loss's gradient is then
//! a second derivative through the rule) all go through the rules, whose
//! derivatives are exact, so finite differences check them. The loss calls
//! one in a let (where its types are in scope), and anywhere an expression
//! is written (also helpers and loops' steps) one may be called, but
//! never in the text of a `tabulate` body (egrad refuses a primitive on
//! values of the index; a helper calling one neither). In the f32 copy
//! the primitive and its rules are `f32` alike. A primitive is not
//! generic, nor is a helper calling one.
//!
//! 7% of the programs (`EGRAD_RANDOM_KERNELS`) call native kernels,
//! registered once per process (`register_kernels`): `gelu_k(x)` (GELU,
//! tanh's approximation) and `mulsin_k(x, y) = x * sin(y)`, element by
//! element on `f64` vectors and matrices, with their VJPs; drawn from a
//! stream of their own as well, with a let of the loss calling one and
//! random calls like the primitives' (not in the text of a `tabulate`
//! body; in loops' steps and helpers too). A kernel has no forward mode
//! and no second derivative, and takes no `f32`: a program calling one
//! has no `jv`, `d2` or `hv` (`d1` is still checked against finite
//! differences), no derivative helper differentiates a helper calling
//! one, and its f32 copy is not checked; each is counted as a skip with
//! its reason (`SOAK skip`).
//!
//! The test prints how many programs call each and how often each form is
//! written, and how many of those calling a primitive had a gradient,
//! forward mode and a second derivative checked against finite
//! differences (those calling a kernel, a gradient); in a release run at
//! least 3% of the programs must call a primitive and 3% a kernel, 3% each
//! have a gradient checked through one, and 1% a second derivative
//! through a primitive.
//!
//! For every program:
//!
//! 0. every long `iterate` the generator wrote is a loop in the IR (a loop
//!    of the count written, less the up to 3 steps of a constant state
//!    peeled off); the programs whose loss runs a loop are counted (at
//!    least 10% of them must, in a release run); a loss whose text runs a
//!    loop of its run-time count (its own, or a helper's it passes `n` to)
//!    has a loop with a run-time count in its IR (these
//!    programs are counted too); the programs whose loss runs a scan are
//!    counted, with their scans (in a release run at least 5% of the
//!    programs must, and at least 5% must use `reverse`, `concat` and a
//!    static recursion each);
//! 1. every function's unoptimized IR gives the same bits in the JIT and the
//!    interpreter (NaN equals NaN), the e-graph-optimized IR agrees with it
//!    within 1e-9 relative (how many are not bit-identical is printed), and
//!    the JIT of the optimized IR equals the interpreter on it bit for bit;
//!    both again on extreme inputs (signed zeros, huge, tiny, infinite,
//!    NaN), and the program with `f32` for `f64` through the JIT and the
//!    interpreter, bit for bit (there, numbers drawn from a key, `f64`s
//!    egrad does not convert to `f32`, are rounded to a multiple of 2^-20
//!    through an integer: `let z = f32(i64(z * 1048576)) * 2^-20`; not for
//!    a program calling a native kernel, which takes `f64`s only);
//! 2. `dloss` equals central finite differences of the loss (h =
//!    1e-6·max(1, |x|), tolerance 1e-5·(1 + |fd|)); `vg` equals the loss and
//!    `dloss`; `jv` equals finite differences along random tangents and the
//!    gradient along them;
//! 3. `d2` equals central finite differences of `d1`, and `hv` is `d2 * ds`,
//!    also through loops (`d2`, with respect to the scalar `s`, is computed
//!    by forward mode there; `hv` is forward over reverse). Should egrad
//!    refuse a second derivative, the program has no `d2` and `hv` (counted
//!    and printed as skipped second derivatives; forward mode goes through
//!    loops' gradients, except those of the sequence constructs above) and
//!    `d1` is still checked against finite differences.
//!
//! A program with a run-time count goes through checks 1 to 3 at the count
//! its step sizes are made for, at 0 and at 1, each function compiled once
//! and called at every count (every function's `i64` parameters get the
//! count, also among extreme inputs); the derivative checks at 0 and 1 are
//! counted apart (passed and skipped).
//!
//! Inputs are drawn away from the kinks of the loss (comparisons, `max`,
//! `min`, `abs`, ties of `max/` and `min/`; not those of values that
//! depend on no float input, such as numbers drawn from a key, which
//! finite differences do not move), found by evaluating every
//! statement of the loss's IR and of each step of its loops (a scan's step
//! with its row of the sequence; a `scan_all`'s steps too; where a
//! margin counts 100 times more: a state crossing a comparison comes as
//! close to it as one step moves it); where no such inputs are found (a
//! structural tie) or where finite differences with steps h and h/10
//! disagree by more than 1e-3 relative, the finite-difference check is
//! skipped and counted (skips must stay under 20%). Finite differences of
//! a loss with loops are evaluated by the JIT, which step 1 found
//! bit-identical to the interpreter.
//!
//! Environment: `EGRAD_RANDOM_SEED` (base seed), `EGRAD_RANDOM_PROGRAMS`
//! (count), `EGRAD_RANDOM_PROGRAM_SEED` (only the program of that seed, as
//! printed on a failure), `EGRAD_RANDOM_DEPTH` (bigger expressions),
//! `EGRAD_RANDOM_LOOPS` (the share of programs with loops, 0 to 1; 0.2),
//! `EGRAD_RANDOM_NEW` (the share of programs with the newer constructs,
//! 0 to 1; 0.2), `EGRAD_RANDOM_INTS` (the share of programs with run-time
//! integers, 0 to 1; 0.3), `EGRAD_RANDOM_SEQ` (the share of programs with
//! sequences of length `L` and run-time bounds, 0 to 1; 0.15),
//! `EGRAD_RANDOM_NEST` (the share of programs with nested `tabulate`s
//! and indexed stacks, 0 to 1; 0.2), `EGRAD_RANDOM_MATCH` (the share of
//! programs with `match`, 0 to 1; 0.08), `EGRAD_RANDOM_KEYS` (the share of
//! programs with random numbers drawn from keys, 0 to 1; 0.08),
//! `EGRAD_RANDOM_CUSTOM` (the share of programs with functions with their
//! own derivative rules, 0 to 1; 0.07), `EGRAD_RANDOM_KERNELS` (the share
//! of programs calling native kernels, 0 to 1; 0.07),
//! `EGRAD_RANDOM_KEEP_GOING` (list every failing program),
//! `EGRAD_RANDOM_PRINT` (print every program), `EGRAD_RANDOM_VERBOSE`
//! (print why a program's finite differences were skipped),
//! `EGRAD_RANDOM_FIRST` (start at that index of the seed stream: the
//! programs `FIRST..FIRST+PROGRAMS`, so a long run can be split in chunks).
//! The test ends with `SOAK run|skip|fail COUNT WHAT` lines (checks run,
//! skipped with their reason, failed), which `scripts/soak.sh N` adds up.
//!
//! # Bugs this test found
//!
//! The reverse pass guarded the VJP of every value upstream of a `select`
//! (a dynamic `if`, `iterate_until`) with `select(g != 0, vjp, 0)`
//! instantiated at the argument's shape, which is wrong for `matmul`, whose
//! cotangent `g` has the result's shape: an internal compiler error when the
//! shapes differ, a silently wrong gradient when they coincide (square
//! matrices), and the same for second derivatives wherever the first
//! derivative has a `select` (from `if`, `max`, `min`, `abs`, `max/`,
//! `min/`) with a `matmul` upstream. Minimized:
//!
//! ```text
//! fn loss(A: f64[3, 2], B: f64[2, 4], s: f64) -> f64 = +/(if s > 0 { matmul(A, B) } else { 0 })
//! @grad(A) fn dloss(A: f64[3, 2], B: f64[2, 4], s: f64) -> f64[3, 2] = loss(A, B, s)
//!   => internal compiler error: VJP of `matmul`: ?g: `bcast` to f64[3, 2] ... got f64[3, 4]
//!
//! fn loss(A: f64[2, 2]) -> f64 { let p = matmul(A, A); +/(if p > 0 { p } else { 0 }) }
//! @grad(A) fn dloss(A: f64[2, 2]) -> f64[2, 2] = loss(A)
//!   => [2, 0, 0, -8] at A = [[1, 2], [3, -4]]; the gradient is [2, 6, 4, -8]
//!
//! +/tanh(matmul(A * s, B)) * max(s, 0.5), differentiated twice in s
//! ```
//!
//! Fixed in `src/differentiate/reverse.rs`: the guard on masked cotangents
//! is now applied only to element-wise ops and scalar cotangents.
//!
//! With SIMD on, an integer value read at an offset in `tabulate` was
//! compiled as vector code (the check that keeps integers in scalar code
//! stopped at the row shift): Cranelift's verifier rejected it (`fpromote`
//! or `fcmp` of an `i64x2`), and without the verifier code generation
//! panicked. Minimized:
//!
//! ```text
//! fn f[N](ix: i64[N]) -> f64[N-1] = tabulate[N-1](i => f64(ix)[i])
//! fn g[N](ix: i64[N], k: i64) -> f64[N-1] = tabulate[N-1](i => f64(ix != k)[i])
//! ```
//!
//! Fixed in `src/backend/lower/elem.rs` (`vectorizable` walks on through
//! index maps); `tests/runtime_ints.rs` has the regression test.
//!
//! Open: a comparison of integers that depend on the index of `tabulate`
//! gives a mask the checker does not know is per index (`mask_as` in
//! `src/lang/check/expr.rs` converts it with `push_plain`, not `push`):
//! `if` on it is refused, and `f64(...)` of it is silently wrong.
//!
//! ```text
//! fn a[N](x: f64[N], ix: i64[N]) -> f64[N] = tabulate[N](i => if ix[i] > 1 { x[i] } else { x[i] * 2.0 })
//!   => error: the condition has type bool[N] but the branches have type f64
//! fn b[N](x: f64[N], ix: i64[N]) -> f64[N] = tabulate[N](i => +/(x * f64(ix[i] > 1)))
//!   => [1, 1, 1] at x = [1, 2, 3], ix = [2, 0, 1]; it is [6, 0, 0]
//! ```
//!
//! The generator compares no integer that depends on the index of
//! `tabulate`.
//!
//! Open: the interpreter holds integers as `f64`, so beyond 2^53 it
//! rounds them and differs from native code (`fn w(x: f64) -> i64 =
//! (i64(x) * 3) % 7` is 5 natively and 0 interpreted at `x = 1e300`). The
//! generator makes integers from floats only as `i64(tanh(e) * c)`, so
//! they stay small even on the extreme inputs.
//!
//! Open: a static integer divided by a literal is folded as a real
//! division (the checker makes `/` an integer division only between two
//! static integers, and a literal is a number), although the language
//! reference says static integers, literals included, follow the integer
//! rules (`/` rounds toward minus infinity); where the quotient is not
//! whole, an `i64` value holds a fraction, on which the JIT (which
//! truncates it) and the interpreter (which keeps it) disagree. Found with
//! `EGRAD_RANDOM_INTS=0.5 EGRAD_RANDOM_SEED=777` (a helper with an `i64`
//! result `i64(tanh(1) * 2.5) / 2`: JIT 0, interpreter 0.5). Minimized:
//!
//! ```text
//! fn h(x: f64) -> i64 = i64(1.9) / 2
//! fn g(x: f64) -> f64 = f64(h(x)) + x
//!   => 1.5 at x = 1 (JIT and interpreter); with `/` of integers it is 1
//! fn half(static k: i64, x: f64) -> f64 = x * f64(k / 2)
//! fn w(x: f64) -> f64 = half(1, x)
//!   => 0.5 at x = 1; it is 0
//! ```
//!
//! Counting a whole literal as an integer there breaks programs that
//! write `2.0 / s` for a real division (GradBench's `ode` and `gmm`): a
//! float literal is not yet told from an integer one, and the fix needs
//! literals to keep their kind.
//!
//! Open (limits of the language met while writing the generator): a
//! scalar `i64` parameter is a count, not a value a function or an `if`
//! may give (`fn f(k: i64) -> i64 = k` and `if c { k } else { k + 1 }`
//! are refused; the generator writes `(k + 0)` there), and a helper's
//! scalar `i64` parameter takes only a parameter or a literal (`h(x, k +
//! 1)` is refused: "must be a non-negative i64 (a count)").
//!
//! Open (found with `match`, which egrad turns into a chain of `if`s):
//! under a condition on integers that is an array (an `i64[N]`, a `bool[N]`
//! parameter), a branch that is a scalar computed at run time is not
//! broadcast to the other's shape, although the language reference says
//! it is (a number is; a float condition and a scalar integer one are
//! fine). And the arms of a `match` after the first are typed as an `if`
//! of their own, so two numbers at the end take a type before they meet
//! the others: an `i64`, or an `f64` in an f32 function.
//!
//! ```text
//! fn d[N](x: f64[N], s: f64, kind: i64[N]) -> f64[N] = if kind == 0 { s } else { x }
//! fn m[N](x: f64[N], s: f64, mask: bool[N]) -> f64[N] = match mask { true => s, false => x }
//!   => error: the branches of this `if` have different types: f64 and f64[N]
//! fn g(x: f64, k: i64) -> f64 = match k { 0 => x, 1 => 3, _ => 2 }
//!   => error: the branches of this `if` have different types: f64 and i64
//! fn e[N](x: f32[N], kind: i64[N]) -> f32[N] = match kind { 0 => x, 1 => 0.5, 2 => 2, _ => 0.25 }
//!   => error: the branches of this `if` have different types: f32[N] and f64[N]
//! ```
//!
//! The generator's arms on an `i64[N]` or a `bool[N]` are of the type of
//! the `match` or numbers, and the last arm of a run-time `match` is never
//! a number (nor a scalar known at compile time).
//!
//! Open: in the body of `tabulate`, the state of a short `iterate` that
//! does not depend on the index is taken for a value of the index: a
//! `matmul` of it with itself is refused (`matmul` of two values that
//! both depend on the index of `tabulate` is not supported yet), although
//! the same product of a block's let is accepted. The generator does not
//! write such a product (see `tab_states`).
//!
//! ```text
//! fn f[N, M](X: f64[N, M], x: f64[N]) -> f64[N] =
//!   tabulate[N](i => +/flatten(iterate_until(2, X, q => matmul(transpose(q), q)[0, 0] > 0.5, q => q)) + x[i])
//! ```
//!
//! Open (found by the fuzzer's functions with rules): a rule receives the
//! tangent (or cotangent) of an inactive parameter as a real zero in the
//! unoptimized program, but the e-graph takes it for the symbolic `(zero
//! T)` of `rulesets/zero.rules`, which absorbs what it multiplies: where
//! the rule multiplies it by NaN or an infinity, the unoptimized program
//! (and the interpreter) gives NaN and the optimized one (and `egrad run`)
//! does not.
//!
//! ```text
//! @custom_jvp(p_jvp) fn p(x: f64, a: f64) -> f64 = x
//! fn p_jvp(x: f64, a: f64, dx: f64, da: f64) -> f64 = dx + log(a) * da
//! @jvp(x) fn dp(x: f64, a: f64, dx: f64) -> f64 = p(x, a)
//!   => egrad run: 1 at x = 1, a = -1, dx = 1; egrad run --interp: NaN
//! ```
//!
//! The rules generated here are finite wherever they are evaluated; the
//! fuzzer's are finite (`tanh` of its values).
//!
//! Open: the language reference says `f32(...)` rounds the numbers drawn
//! from a key, but egrad does not convert `f64` to `f32` ("converting f64
//! to f32 is not supported yet"); the f32 copy rounds them through an
//! integer instead.
//!
//! Fixed (derivatives with respect to a scan's sequence, reverse and
//! forward, landed): a scan in a loop's step (a long `iterate`'s or a
//! scan's) over a sequence from outside the loop, which the loop carries
//! along its state, made every derivative through that loop an error,
//! although none takes the sequence (the outer loop's step is
//! differentiated with respect to its whole packed state, which holds the
//! sequence). Minimized:
//!
//! ```text
//! fn l[N](x: f64[N], xs: f64[N]) -> f64 = +/scan(xs, x, (q, e) => scan(xs, q, (s, f) => s * f))
//! @grad(x) fn dl[N](x: f64[N], xs: f64[N]) -> f64[N] = l(x, xs)
//!   => error: `dl` cannot be differentiated: differentiating with respect
//!      to the sequence a `scan` reads is not supported yet
//! @jvp(x) fn jl[N](x: f64[N], xs: f64[N], dx: f64[N]) -> f64 = l(x, xs)
//!   => error: ... forward mode with respect to the sequence a `scan` reads ...
//! ```
//!
//! (The same with `+/iterate(3000, x, q => scan(xs, q, (s, e) => s * e))`.)
//! Such programs are still generated, with their derivatives checked;
//! where egrad reports a documented limit for them, those are left out
//! (the value checks remain), and the test counts and prints them.

mod common;

use common::env_u64;
use common::rng::Rng;
use egrad::internals::backend::{self, BackendOptions};
use egrad::internals::ir::interp::run;
use egrad::internals::ir::Function;
use egrad::internals::lang::check::UNROLL_STMTS;
use egrad::internals::ops::Op;
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim};
use egrad::{ErrorKind, Program};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------- random

fn mix(seed: u64) -> u64 {
    Rng(seed).next_u64()
}

thread_local! {
    /// Constructs written while generating the current program (on this
    /// thread), with the text that shows them: counted for the coverage line
    /// when that text is in the final program.
    static TAGS: std::cell::RefCell<Vec<(&'static str, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn tag(name: &'static str, text: &str) {
    TAGS.with(|t| t.borrow_mut().push((name, text.to_string())));
}

// ---------------------------------------------------------------- types

/// A dimension: the loss's `N`, `M` (`K` in helpers) or `N-1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum D {
    N,
    M,
    N1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ty {
    S,
    V(D),
    Mt(D, D),
}

const ALL_DIMS: [D; 3] = [D::N, D::M, D::N1];

impl Ty {
    fn is_array(self) -> bool {
        self != Ty::S
    }
    /// The type of `x[k]`.
    fn row(self) -> Option<Ty> {
        match self {
            Ty::S => None,
            Ty::V(_) => Some(Ty::S),
            Ty::Mt(_, c) => Some(Ty::V(c)),
        }
    }
    fn lead(self) -> Option<D> {
        match self {
            Ty::S => None,
            Ty::V(d) | Ty::Mt(d, _) => Some(d),
        }
    }
    /// An upper bound of the number of elements.
    fn len_max(self) -> f64 {
        match self {
            Ty::S => 1.0,
            Ty::V(d) => dim_max(d),
            Ty::Mt(a, b) => dim_max(a) * dim_max(b),
        }
    }
    fn uses_n1(self) -> bool {
        matches!(self, Ty::V(D::N1) | Ty::Mt(D::N1, _) | Ty::Mt(_, D::N1))
    }
    /// This type with its dims renamed (None if a dim has no image).
    fn map(self, f: &dyn Fn(D) -> Option<D>) -> Option<Ty> {
        Some(match self {
            Ty::S => Ty::S,
            Ty::V(d) => Ty::V(f(d)?),
            Ty::Mt(a, b) => Ty::Mt(f(a)?, f(b)?),
        })
    }
}

const N_MAX: usize = 5;
const M_MAX: usize = 3;

fn dim_max(d: D) -> f64 {
    match d {
        D::N => N_MAX as f64,
        D::M => M_MAX as f64,
        D::N1 => (N_MAX - 1) as f64,
    }
}

/// The largest magnitude a generated value may have before it is wrapped.
const LIMIT: f64 = 8.0;

// ---------------------------------------------------------------- expressions

/// A generated expression.
#[derive(Clone, Debug)]
struct Ex {
    /// Source text, always an operand (a name, a call, parenthesized, ...).
    s: String,
    /// An upper bound of the magnitude of every element.
    b: f64,
    /// An array whose elements are generically distinct (no structural ties,
    /// so `max/` and `min/` have a unique argmax).
    var: bool,
    /// Depends on the index of the enclosing `tabulate`.
    tab: bool,
    /// Uses only ops that `tabulate` can apply to stacked values (so a
    /// helper made of it can be called with `x[i]`).
    ts: bool,
    /// Known at compile time (made of literals and static numbers).
    k: bool,
}

impl Ex {
    fn leaf(s: impl Into<String>, b: f64, var: bool) -> Ex {
        Ex {
            s: s.into(),
            b,
            var,
            tab: false,
            ts: true,
            k: false,
        }
    }
    fn lit(x: f64) -> Ex {
        Ex {
            s: fmt_lit(x),
            b: x.abs(),
            var: false,
            tab: false,
            ts: true,
            k: true,
        }
    }
    /// A compound of `parts`: flags combined, text and bound given.
    fn of(s: String, b: f64, var: bool, parts: &[&Ex]) -> Ex {
        Ex {
            s,
            b,
            var,
            tab: parts.iter().any(|p| p.tab),
            ts: parts.iter().all(|p| p.ts),
            k: parts.iter().all(|p| p.k),
        }
    }
    fn not_ts(mut self) -> Ex {
        self.ts = false;
        self
    }
}

fn fmt_lit(x: f64) -> String {
    let s = format!("{x}");
    if x < 0.0 {
        format!("({s})")
    } else {
        s
    }
}

/// A condition (a bool expression).
#[derive(Clone, Debug)]
struct Cond {
    s: String,
    tab: bool,
    ts: bool,
}

/// A name in scope.
#[derive(Clone, Debug)]
struct Var {
    name: String,
    ty: Ty,
    b: f64,
    var: bool,
    tab: bool,
    k: bool,
    used: bool,
}

/// A parameter of a helper.
#[derive(Clone, Debug)]
enum HParam {
    Dyn(Ty),
    StaticInt,
    StaticReal,
    StaticBool,
    /// `n: i64`, a run-time loop count: passed `n` where the caller has
    /// one, or a literal.
    RunCount(u64),
    /// `static k: i64`, the depth of a static recursion: passed a literal
    /// from 1 to 4.
    Depth,
    /// `kind: i64[N]`: passed the loss's `kind` (see `MATCH_PARAMS`).
    Kind,
    /// `kk: i64[2]`, a key: passed one in scope or `random_key(c)`.
    Key,
}

/// A helper function the generator may call.
#[derive(Clone, Debug)]
struct Helper {
    name: String,
    params: Vec<HParam>,
    /// Result types in the helper's dims (N, M = `K`, N1 = `N-1`).
    rets: Vec<Ty>,
    /// Bound of the results (infinite: unknown, e.g. a gradient).
    b: f64,
    ts: bool,
    /// Its array arguments must be `var` (it takes `max/` or `min/` of them).
    needs_var: bool,
    /// Uses `N-1`: only called where N >= 2 (from the loss, with N = N).
    uses_n1: bool,
    /// Generic over the element type (`fn h[T, N](v: T[N], a: T) -> T`):
    /// some argument must be typed (not only numbers).
    generic: bool,
    /// Runs a loop (a long `iterate`): not called inside `tabulate` or a
    /// loop's step, and never differentiated by a derivative helper.
    has_loop: bool,
    /// A user primitive (a function with its own derivative rules, or a
    /// native kernel), or calls one: never written in the text of a
    /// `tabulate` body (egrad refuses one on values of its index).
    prim: bool,
    /// A native kernel, or calls one: never differentiated by a
    /// derivative helper (a kernel's VJP has no derivative).
    kernel: bool,
    /// Tags recorded with the text of each call (see `tag`).
    tags: Vec<&'static str>,
}

/// The length of a `tabulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Len {
    D(D),
    /// The literal 2 (N >= 2 in the loss).
    Two,
    /// `N-2` (empty when N = 2).
    N2,
    /// An integer length (1 or 2): a part of `concat`.
    Lit(u64),
    /// `M-1` (`K-1` in helpers; empty when it is 1).
    M1,
}

#[derive(Clone, Debug)]
struct Tab {
    len: Len,
    idx: String,
}

/// Generation state for one function body.
struct Gen<'r> {
    rng: &'r mut Rng,
    env: Vec<Var>,
    helpers: Vec<Helper>,
    tab: Option<Tab>,
    /// The smallest value N may have here (2 in the loss, 1 in helpers).
    n_min: u64,
    /// Literal sizes (the loss sometimes has them).
    lit: Option<(u64, u64)>,
    m_name: &'static str,
    allow_n1: bool,
    fresh: usize,
    /// Static integer parameter usable as an `iterate` count.
    static_count: Option<String>,
    /// Inside the text of a `tabulate` body (also where values are
    /// hoisted out of it): no `tabulate` may be written here.
    no_tabulate: bool,
    /// Long `iterate`s (real loops) `gen` may still write at random (0 in
    /// programs without loops, which then draw exactly what they drew
    /// before loops were generated).
    long_left: u32,
    /// Loops that may still be written inside a loop's step.
    nest_left: u32,
    /// How many loop steps are being generated (1: a loop's step, 2: the
    /// step of a loop inside it).
    in_long: u32,
    /// Inside a short `iterate`'s or an `iterate_until`'s step: no long
    /// `iterate` here (a count of 0 would drop it, and the count multiplies
    /// its cost).
    no_long: u32,
    /// A long `iterate`, or a call of a helper that has one, was written.
    made_loop: bool,
    /// The function has a run-time count `n: i64`: long iterates may use
    /// it as their count, with a step size for this count.
    rt_count: Option<u64>,
    /// The next helper call (not those in its arguments) is of a helper
    /// that takes a run-time count.
    only_rt: bool,
    /// The next helper call (not those in its arguments) is of this helper.
    only_helper: Option<String>,
    /// Parameters of the loss that no derivative takes (`xs: f64[N]`,
    /// `Xs: f64[N, M]`): the sequences a `scan` that is a loop may read.
    seqs: Vec<(String, Ty)>,
    /// Scans `gen` may still write at random (0 in programs without the
    /// newer constructs, which then draw exactly what they drew before).
    scan_left: u32,
    /// `reverse` and `concat` may be written.
    cat: bool,
    /// The run-time integer parameters of the loss (empty elsewhere, and in
    /// programs without them, which then draw what they drew before).
    ints: Vec<IntParam>,
    /// The helper with an `i64` result (see `gen_int_helper`), and a bound
    /// of its result.
    int_helper: Option<(String, f64)>,
    /// Nested `tabulate`s may be written (`EGRAD_RANDOM_NEST`; false
    /// elsewhere, and in programs without them, which then draw what they
    /// drew before).
    nest: bool,
    /// Values that depend on the index of `tabulate` may be indexed
    /// (`(X[i] .* w)[c]`, `[i]`, `[k]`, `[ix[i]]`; `EGRAD_RANDOM_NEST` too).
    stack_ix: bool,
    /// The `tabulate`s enclosing the current one (`tab`), outermost first:
    /// empty unless a nested `tabulate` is being generated.
    outer: Vec<Tab>,
    /// `match` may be written (`EGRAD_RANDOM_MATCH`; false elsewhere, and
    /// in programs without it, which then draw what they drew before).
    matches: bool,
    /// The loss's run-time parameters a `match` may take apart (`kind:
    /// i64[N]`, `mode: i64`, `robust: bool`, `mask: bool[N]`; empty
    /// elsewhere).
    mparams: Vec<&'static str>,
    /// Noise from keys may be drawn in expressions (`EGRAD_RANDOM_KEYS`;
    /// false elsewhere, and in programs without it).
    noise: bool,
    /// Keys in scope outside loops' steps (texts of `i64[2]` values: the
    /// loss's `key`, `random_key(seed)`, the keys its draws gave).
    keys: Vec<String>,
    /// The matrix states of the short `iterate`s written in the text of a
    /// `tabulate` body (hoisted, not depending on its index): egrad takes
    /// them for values of the index, and refuses a `matmul` of two of them
    /// (see the module doc), which is not written.
    tab_states: Vec<String>,
    /// User primitives (functions with their own derivative rules, native
    /// kernels) may be called at random (`EGRAD_RANDOM_CUSTOM`,
    /// `EGRAD_RANDOM_KERNELS`; false elsewhere, and in programs without
    /// them, which then draw what they drew before).
    prims: bool,
    /// The next helper call (not those in its arguments) is of a user
    /// primitive or a helper calling one.
    only_prim: bool,
    /// A user primitive (or a helper calling one) was called; a native
    /// kernel (or a helper calling one) was.
    made_prim: bool,
    made_kernel: bool,
}

const LITS: &[f64] = &[0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75, -0.5, -2.0];

impl<'r> Gen<'r> {
    fn new(rng: &'r mut Rng, n_min: u64, m_name: &'static str) -> Gen<'r> {
        Gen {
            rng,
            env: Vec::new(),
            helpers: Vec::new(),
            tab: None,
            n_min,
            lit: None,
            m_name,
            allow_n1: n_min >= 2,
            fresh: 0,
            static_count: None,
            no_tabulate: false,
            long_left: 0,
            nest_left: 0,
            in_long: 0,
            no_long: 0,
            made_loop: false,
            rt_count: None,
            only_rt: false,
            only_helper: None,
            seqs: Vec::new(),
            scan_left: 0,
            cat: false,
            ints: Vec::new(),
            int_helper: None,
            nest: false,
            stack_ix: false,
            outer: Vec::new(),
            matches: false,
            mparams: Vec::new(),
            noise: false,
            keys: Vec::new(),
            tab_states: Vec::new(),
            prims: false,
            only_prim: false,
            made_prim: false,
            made_kernel: false,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    fn dim(&self, d: D) -> String {
        match (self.lit, d) {
            (Some((n, _)), D::N) => n.to_string(),
            (Some((_, m)), D::M) => m.to_string(),
            (Some((n, _)), D::N1) => (n - 1).to_string(),
            (None, D::N) => "N".into(),
            (None, D::M) => self.m_name.into(),
            (None, D::N1) => "N-1".into(),
        }
    }

    fn ty_text(&self, t: Ty) -> String {
        match t {
            Ty::S => "f64".into(),
            Ty::V(d) => format!("f64[{}]", self.dim(d)),
            Ty::Mt(a, b) => format!("f64[{}, {}]", self.dim(a), self.dim(b)),
        }
    }

    fn min_len(&self, d: D) -> u64 {
        match d {
            D::N => self.n_min,
            D::M | D::N1 => 1,
        }
    }

    /// How many elements `d` has for sure here (all of them with literal sizes).
    fn known_len(&self, d: D) -> u64 {
        match (self.lit, d) {
            (Some((n, _)), D::N) => n,
            (Some((_, m)), D::M) => m,
            (Some((n, _)), D::N1) => n - 1,
            (None, _) => self.min_len(d),
        }
    }

    /// `let name = e` written to `body`, in scope from here, and listed
    /// in `lets`.
    fn bind_let(
        &mut self,
        body: &mut String,
        lets: &mut Vec<String>,
        name: String,
        e: &Ex,
        ty: Ty,
    ) {
        let _ = writeln!(body, "  let {name} = {}", e.s);
        self.push_var(&name, e, ty);
        lets.push(name);
    }

    fn push_var(&mut self, name: &str, e: &Ex, ty: Ty) {
        self.env.push(Var {
            name: name.to_string(),
            ty,
            b: e.b,
            var: e.var,
            tab: e.tab,
            k: e.k,
            used: false,
        });
    }

    /// Names visible here (the latest binding of each name), by index.
    fn visible(&self) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (i, v) in self.env.iter().enumerate().rev() {
            if !seen.insert(v.name.clone()) {
                continue;
            }
            if v.tab && self.tab.is_none() {
                continue;
            }
            out.push(i);
        }
        out
    }

    fn use_var(&mut self, i: usize) -> Ex {
        self.env[i].used = true;
        let v = &self.env[i];
        Ex {
            s: v.name.clone(),
            b: v.b,
            var: v.var,
            tab: v.tab,
            ts: true,
            k: v.k,
        }
    }

    /// Types that can be built from the names in scope.
    fn avail(&self) -> Vec<Ty> {
        let mut set: Vec<Ty> = vec![Ty::S];
        let add = |t: Ty, set: &mut Vec<Ty>| {
            if !set.contains(&t) {
                set.push(t);
            }
        };
        for i in self.visible() {
            let v = &self.env[i];
            if v.tab {
                continue;
            }
            add(v.ty, &mut set);
            match v.ty {
                Ty::V(D::N) if self.allow_n1 && !self.no_tabulate => add(Ty::V(D::N1), &mut set),
                Ty::Mt(a, b) => {
                    add(Ty::Mt(b, a), &mut set);
                    add(Ty::Mt(a, a), &mut set);
                    add(Ty::Mt(b, b), &mut set);
                    add(Ty::V(a), &mut set);
                    add(Ty::V(b), &mut set);
                }
                _ => {}
            }
        }
        set.retain(|t| self.allow_n1 || !t.uses_n1());
        set
    }

    // ------------------------------------------------------------ leaves

    /// Arrays `base[i + off]` can read inside `tabulate[len]`: (base text,
    /// its var flag, its bound, offset, row type).
    fn tab_bases(&self, len: Len) -> Vec<(String, bool, f64, u64, Ty)> {
        let mut out = Vec::new();
        for i in self.visible() {
            let v = &self.env[i];
            if v.tab {
                continue;
            }
            let mut cands = vec![(v.name.clone(), v.ty)];
            if let Ty::Mt(a, b) = v.ty {
                cands.push((format!("transpose({})", v.name), Ty::Mt(b, a)));
            }
            if self.cat && v.ty.is_array() {
                // `reverse(x)[i]` reads `x` backwards along `i`.
                cands.push((format!("reverse({})", v.name), v.ty));
            }
            for (base, ty) in cands {
                let (Some(lead), Some(row)) = (ty.lead(), ty.row()) else {
                    continue;
                };
                for o in self.offsets(len, lead) {
                    out.push((base.clone(), v.var, v.b, o, row));
                }
            }
        }
        out
    }

    /// The types of the rows the enclosing `tabulate` reads (of every
    /// level, when nested), as `tab_bases` lists them.
    fn tab_rows(&self) -> Vec<Ty> {
        let Some(tab) = &self.tab else {
            return Vec::new();
        };
        let mut rows: Vec<Ty> = self.tab_bases(tab.len).iter().map(|r| r.4).collect();
        for t in &self.outer {
            rows.extend(self.tab_bases(t.len).iter().map(|r| r.4));
        }
        rows
    }

    /// The offsets `o` at which `tabulate[len]` may read `x[i + o]` from
    /// an array whose leading dimension is `lead`.
    fn offsets(&self, len: Len, lead: D) -> Vec<u64> {
        match (len, lead) {
            (Len::D(l), d) if l == d => vec![0],
            (Len::D(D::N1), D::N) => vec![0, 1],
            (Len::Two, D::N) if self.n_min >= 2 => vec![0],
            (Len::N2, D::N) if self.n_min >= 2 => vec![0, 1, 2],
            (Len::N2, D::N1) if self.n_min >= 2 => vec![0, 1],
            // An integer length reads from 0 up to what is there for sure.
            (Len::Lit(k), _) => (0..3).filter(|o| o + k <= self.known_len(lead)).collect(),
            (Len::M1, D::M) => vec![0, 1],
            _ => vec![],
        }
    }

    /// `base[i]` or `base[i + 1]` of type `ty` in the enclosing `tabulate`.
    fn tab_leaf(&mut self, ty: Ty) -> Option<Ex> {
        if !self.outer.is_empty() {
            return self.nested_leaf(ty);
        }
        let tab = self.tab.clone()?;
        let all = self.tab_bases(tab.len);
        let bases: Vec<_> = all.iter().filter(|r| r.4 == ty).cloned().collect();
        // A scalar may also be `X[i, k]`: column `k` (static) along `i`.
        let cols: Vec<_> = all
            .iter()
            .filter(|r| ty == Ty::S && matches!(r.4, Ty::V(_)))
            .cloned()
            .collect();
        if bases.is_empty() && cols.is_empty() {
            return None;
        }
        let col = !cols.is_empty() && (bases.is_empty() || self.rng.chance(0.35));
        let (base, var, b, off, row) = self.rng.pick(if col { &cols } else { &bases });
        let name = base
            .trim_start_matches("transpose(")
            .trim_start_matches("reverse(")
            .trim_end_matches(')');
        self.mark_used(name);
        let i = &tab.idx;
        let ix = match (off, self.rng.below(6)) {
            (0, 0) => format!("{i} + 1 - 1"),
            (0, _) => i.clone(),
            (_, 0) => format!("{off} + {i}"),
            (_, 1) => format!("{i} + {} - 1", off + 1),
            _ => format!("{i} + {off}"),
        };
        let text = match row {
            Ty::V(c) if col => {
                let k = self.rng.below(self.known_len(c) as usize);
                let text = format!("{base}[{ix}, {k}]");
                tag(
                    if off == 0 {
                        "X[i, k] in tabulate"
                    } else {
                        "X[i + c, k] in tabulate"
                    },
                    &text,
                );
                text
            }
            _ => format!("{base}[{ix}]"),
        };
        if base.starts_with("reverse(") {
            tag("reverse(x)[i] in tabulate", &text);
        }
        let mut e = Ex::leaf(text, b, var);
        e.tab = true;
        Some(e)
    }

    /// A leaf of type `ty`: a name, a literal, an index, or the simplest
    /// derived form.
    fn leaf(&mut self, ty: Ty) -> Ex {
        let mut cands: Vec<Ex> = Vec::new();
        let vis = self.visible();
        let mut var_idx = Vec::new();
        for &i in &vis {
            if self.env[i].ty == ty {
                var_idx.push(i);
            }
        }
        if !var_idx.is_empty() && self.rng.chance(0.7) {
            // The most recent binding half of the time (`visible` is newest first).
            let i = if self.rng.chance(0.5) {
                var_idx[0]
            } else {
                self.rng.pick(&var_idx)
            };
            return self.use_var(i);
        }
        for &i in &var_idx {
            let e = self.use_var(i);
            cands.push(e);
        }
        // Rows of the enclosing tabulate.
        if let Some(e) = self.tab_leaf(ty) {
            if self.rng.chance(0.6) {
                return e;
            }
            cands.push(e);
        }
        if ty == Ty::S && (self.rng.chance(0.25) || cands.is_empty()) {
            let x = self.rng.pick(LITS);
            cands.push(Ex::lit(x));
        }
        // Static indices of names.
        for &i in &vis {
            let v = self.env[i].clone();
            if v.tab {
                continue;
            }
            match (v.ty, ty) {
                (Ty::V(d), Ty::S) => {
                    let k = self.rng.below(self.min_len(d) as usize);
                    let mut e = Ex::leaf(format!("{}[{k}]", v.name), v.b, false).not_ts();
                    e.k = v.k;
                    cands.push(e);
                }
                (Ty::Mt(r, c), Ty::V(d)) if c == d => {
                    let k = self.rng.below(self.min_len(r) as usize);
                    cands.push(Ex::leaf(format!("{}[{k}]", v.name), v.b, v.var).not_ts());
                }
                (Ty::Mt(r, c), Ty::V(d)) if r == d => {
                    let k = self.rng.below(self.min_len(c) as usize);
                    cands
                        .push(Ex::leaf(format!("transpose({})[{k}]", v.name), v.b, v.var).not_ts());
                }
                (Ty::Mt(r, c), Ty::S) => {
                    let k = self.rng.below(self.min_len(r) as usize);
                    let j = self.rng.below(self.min_len(c) as usize);
                    cands.push(Ex::leaf(format!("{}[{k}, {j}]", v.name), v.b, false).not_ts());
                }
                _ => {}
            }
        }
        if cands.is_empty() {
            if let Some(e) = self.derive(ty) {
                return e;
            }
            panic!("generator: no leaf of type {ty:?}");
        }
        let e = self.rng.pick(&cands);
        // Mark a picked name used.
        if let Some(i) = vis.iter().find(|&&i| self.env[i].name == e.s) {
            self.env[*i].used = true;
        }
        e
    }

    /// A value of an array type no name has: `N-1` differences, a
    /// transpose, a matrix product.
    fn derive(&mut self, ty: Ty) -> Option<Ex> {
        let vis = self.visible();
        let names: Vec<Var> = vis
            .iter()
            .map(|&i| self.env[i].clone())
            .filter(|v| !v.tab)
            .collect();
        if self.tab.is_some() {
            return self.hoist(|g| g.derive(ty));
        }
        match ty {
            Ty::V(D::N1) => {
                if self.no_tabulate {
                    return None;
                }
                // Differences of a column: `A[i + 1, k] - A[i, k]`.
                let mats: Vec<Var> = names
                    .iter()
                    .filter(|v| matches!(v.ty, Ty::Mt(D::N, _)))
                    .cloned()
                    .collect();
                if !mats.is_empty() && self.rng.chance(0.5) {
                    let v = self.rng.pick(&mats);
                    let Ty::Mt(_, c) = v.ty else { unreachable!() };
                    self.mark_used(&v.name);
                    let k = self.rng.below(self.known_len(c) as usize);
                    let i = self.fresh("i");
                    let len = self.dim(D::N1);
                    let text = format!("{n}[{i} + 1, {k}]", n = v.name);
                    tag("X[i + c, k] in tabulate", &text);
                    return Some(
                        Ex::leaf(
                            format!("tabulate[{len}]({i} => {text} - {n}[{i}, {k}])", n = v.name),
                            2.0 * v.b,
                            v.var,
                        )
                        .not_ts(),
                    );
                }
                let v = names.iter().find(|v| v.ty == Ty::V(D::N))?.clone();
                self.mark_used(&v.name);
                let i = self.fresh("i");
                let len = self.dim(D::N1);
                Some(
                    Ex::leaf(
                        format!(
                            "tabulate[{len}]({i} => {n}[{i} + 1] - {n}[{i}])",
                            n = v.name
                        ),
                        2.0 * v.b,
                        v.var,
                    )
                    .not_ts(),
                )
            }
            Ty::Mt(a, b) => {
                if let Some(v) = names.iter().find(|v| v.ty == Ty::Mt(b, a)).cloned() {
                    self.mark_used(&v.name);
                    return Some(Ex::leaf(format!("transpose({})", v.name), v.b, v.var).not_ts());
                }
                if a == b {
                    // (The states of `tab_states` last: a `matmul` of one
                    // with itself is refused.)
                    let states = names.iter().filter(|v| self.tab_states.contains(&v.name));
                    let order: Vec<Var> = names
                        .iter()
                        .filter(|v| !self.tab_states.contains(&v.name))
                        .chain(states)
                        .cloned()
                        .collect();
                    for v in &order {
                        if let Ty::Mt(r, c) = v.ty {
                            self.mark_used(&v.name);
                            if r == a {
                                return Some(
                                    Ex::leaf(
                                        format!("matmul({n}, transpose({n}))", n = v.name),
                                        dim_max(c) * v.b * v.b,
                                        false,
                                    )
                                    .not_ts(),
                                )
                                .map(|e| self.bounded(e));
                            }
                            if c == a {
                                return Some(
                                    Ex::leaf(
                                        format!("matmul(transpose({n}), {n})", n = v.name),
                                        dim_max(r) * v.b * v.b,
                                        false,
                                    )
                                    .not_ts(),
                                )
                                .map(|e| self.bounded(e));
                            }
                        }
                    }
                }
                None
            }
            Ty::V(d) => {
                for v in &names {
                    if let Ty::Mt(r, c) = v.ty {
                        if c == d {
                            self.mark_used(&v.name);
                            return Some(Ex::leaf(format!("{}[0]", v.name), v.b, v.var).not_ts());
                        }
                        if r == d {
                            self.mark_used(&v.name);
                            return Some(
                                Ex::leaf(format!("transpose({})[0]", v.name), v.b, v.var).not_ts(),
                            );
                        }
                    }
                }
                None
            }
            Ty::S => None,
        }
    }

    fn mark_used(&mut self, name: &str) {
        if let Some(v) = self.env.iter_mut().rev().find(|v| v.name == name) {
            v.used = true;
        }
    }

    /// Run `f` outside the enclosing `tabulate` (values that do not depend
    /// on its index).
    fn hoist<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.tab.take();
        let outer = std::mem::take(&mut self.outer);
        let r = f(self);
        self.tab = saved;
        self.outer = outer;
        r
    }

    // ------------------------------------------------------------ bounds

    /// Keep `e` within LIMIT.
    fn bounded(&mut self, e: Ex) -> Ex {
        self.fit(e, LIMIT)
    }

    /// Keep `e` within `lim`: `tanh`, `sin` or a power-of-two scaling.
    fn fit(&mut self, e: Ex, lim: f64) -> Ex {
        if e.b <= lim {
            return e;
        }
        let choice = if e.b.is_finite() {
            self.rng.below(3)
        } else {
            0
        };
        match choice {
            0 => Ex::of(format!("tanh({})", e.s), 1.0, e.var, &[&e]),
            1 if e.b <= 16.0 && lim >= 1.0 => Ex::of(format!("sin({})", e.s), 1.0, e.var, &[&e]),
            _ => {
                let mut k = 1.0;
                while e.b * k > lim {
                    k *= 0.5;
                }
                Ex::of(format!("({} * {})", e.s, fmt_lit(k)), e.b * k, e.var, &[&e])
            }
        }
    }

    // ------------------------------------------------------------ generation

    /// A random expression of type `ty`.
    fn gen(&mut self, ty: Ty, depth: u32) -> Ex {
        // Inside `tabulate`, types other than the scalars and the rows being
        // read are computed outside it.
        if self.tab.is_some() {
            let rows = self.tab_rows();
            if ty != Ty::S && !rows.contains(&ty) {
                return self.hoist(|g| g.gen(ty, depth));
            }
            if self.rng.chance(0.15) {
                return self.hoist(|g| g.gen(ty, depth));
            }
        }
        if depth == 0 || self.rng.chance(0.2) {
            let e = self.leaf(ty);
            return self.bounded(e);
        }
        let d = depth - 1;
        // The newer constructs: drawn only in the programs that have them
        // (the others draw what they drew before).
        if (self.cat || self.scan_left > 0) && self.rng.chance(0.15) {
            if let Some(e) = self.novel(ty, d) {
                return self.bounded(e);
            }
        }
        // Run-time integers, likewise.
        if self.int_ok() && self.rng.chance(0.12) {
            if let Some(e) = self.int_float(ty, d) {
                return self.bounded(e);
            }
        }
        // Nested `tabulate`s and indexed stacks, likewise.
        if (self.nest || self.stack_ix) && self.rng.chance(0.12) {
            if let Some(e) = self.nest_construct(ty, d) {
                return self.bounded(e);
            }
        }
        // `match`, and noise drawn from keys, likewise.
        if self.matches && self.rng.chance(0.1) {
            if let Some(e) = self.match_expr(ty, d) {
                return self.bounded(e);
            }
        }
        if self.noise && self.rng.chance(0.05) {
            if let Some(e) = self.noise_expr(ty, d) {
                return self.bounded(e);
            }
        }
        // User primitives, likewise (more often in loops' steps).
        if self.prims && self.rng.chance(if self.in_long > 0 { 0.2 } else { 0.06 }) {
            if let Some(e) = self.prim_call(ty, d) {
                return self.bounded(e);
            }
        }
        let e = loop {
            let r = self.rng.below(100);
            let e = match r {
                0..=15 => Some(self.binary(ty, d)),
                16..=28 => Some(self.math(ty, d)),
                29..=36 => Some(self.maxmin(ty, d)),
                37..=46 => self.if_expr(ty, d),
                47..=51 => Some(self.block(ty, d)),
                52..=63 => self.call(ty, d),
                64..=69 => {
                    // `long_left` first: without loops nothing more is drawn.
                    if self.long_left > 0
                        && self.in_long == 0
                        && self.long_ok()
                        && self.rng.chance(0.3)
                    {
                        self.long_left -= 1;
                        self.long_iterate(ty, d)
                    } else {
                        self.iterate(ty, d)
                    }
                }
                70..=73 => self.safe_branch(ty, d),
                _ => match ty {
                    Ty::S => self.scalar_special(d),
                    Ty::V(_) | Ty::Mt(..) => self.array_special(ty, d),
                },
            };
            if let Some(e) = e {
                break e;
            }
        };
        self.bounded(e)
    }

    // ------------------------------------------------------------ newer constructs

    /// One of the newer constructs giving `ty`: a `scan`, `reverse` or
    /// `concat` (None where none fits here).
    fn novel(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut kinds = Vec::new();
        if self.scan_left > 0 && self.scan_ok() && !matches!(ty, Ty::Mt(..)) {
            kinds.push(0);
        }
        if self.cat {
            kinds.extend([1, 2]);
        }
        if kinds.is_empty() {
            return None;
        }
        match self.rng.pick(&kinds) {
            0 => {
                let e = self.scan_expr(ty, d);
                self.scan_left -= u32::from(e.is_some());
                e
            }
            1 => self.reverse_expr(ty, d),
            _ => self.concat_expr(ty, d),
        }
    }

    /// The text of a `tabulate` length.
    fn len_text(&self, len: Len) -> String {
        match (len, self.lit) {
            (Len::D(d), _) => self.dim(d),
            (Len::Two, _) => "2".into(),
            (Len::Lit(k), _) => k.to_string(),
            (Len::N2, Some((n, _))) => (n - 2).to_string(),
            (Len::N2, None) => "N-2".into(),
            (Len::M1, Some((_, m))) => (m - 1).to_string(),
            (Len::M1, None) => format!("{}-1", self.m_name),
        }
    }

    /// `reverse(a)` of type `ty`, or for a scalar an element of one
    /// (`reverse(a)[0]` is the last element of `a`). Outside `tabulate`:
    /// `reverse` does not take values that depend on its index.
    fn reverse_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.reverse_expr(ty, d));
        }
        let e = match ty {
            Ty::S => {
                let arrays: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
                if arrays.is_empty() {
                    return None;
                }
                let t = self.rng.pick(&arrays);
                let a = self.gen(t, d);
                let lead = t.lead()?;
                let k = self.rng.below(self.min_len(lead) as usize);
                let ix = match t {
                    Ty::Mt(_, c) => format!("{k}, {}", self.rng.below(self.min_len(c) as usize)),
                    _ => k.to_string(),
                };
                Ex::of(format!("reverse({})[{ix}]", a.s), a.b, false, &[&a])
            }
            _ => {
                let a = self.gen(ty, d);
                Ex::of(format!("reverse({})", a.s), a.b, a.var, &[&a])
            }
        };
        tag("reverse", &e.s);
        if self.in_long > 0 {
            tag("reverse or concat in a loop's step", &e.s);
        }
        Some(e.not_ts())
    }

    /// `concat(a, b)` of type `ty` (a scalar: the sum or an element of one):
    /// one part of integer length 1 or 2 (`tabulate[1](i => ...)`), the
    /// other `N-1`, `N-2` or `M-1` long (a `tabulate`, or any value of
    /// type `f64[N-1]`), in either order, so that the lengths add up to
    /// `ty`'s. Outside `tabulate`, like `reverse`.
    fn concat_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.concat_expr(ty, d));
        }
        if self.no_tabulate {
            return None;
        }
        if ty == Ty::S {
            let arrays: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
            if arrays.is_empty() {
                return None;
            }
            let t = self.rng.pick(&arrays);
            let a = self.concat_expr(t, d)?;
            let e = if self.rng.chance(0.6) {
                Ex::of(format!("(+/{})", a.s), t.len_max() * a.b, false, &[&a])
            } else {
                let ix = match t {
                    Ty::Mt(..) => "0, 0",
                    _ => "0",
                };
                Ex::of(format!("({})[{ix}]", a.s), a.b, false, &[&a])
            };
            return Some(e.not_ts());
        }
        let (lead, elem) = match ty {
            Ty::V(l) => (l, Ty::S),
            Ty::Mt(l, c) => (l, Ty::V(c)),
            Ty::S => return None,
        };
        let (k, rest) = match lead {
            D::N if self.n_min >= 2 && self.rng.chance(0.3) => (2, Len::N2),
            D::N => (1, Len::D(D::N1)),
            D::M => (1, Len::M1),
            D::N1 if self.allow_n1 && self.n_min >= 2 => (1, Len::N2),
            D::N1 => return None,
        };
        let head = self.tabulate_body(Len::Lit(k), elem, d)?;
        let head = Ex::of(
            format!("tabulate[{k}]({})", head.s),
            head.b,
            false,
            &[&head],
        );
        let whole = ty == Ty::V(D::N) && k == 1 && self.rng.chance(0.3);
        let tail = if whole && self.avail().contains(&Ty::V(D::N1)) {
            self.gen(Ty::V(D::N1), d)
        } else {
            let e = self.tabulate_body(rest, elem, d)?;
            Ex::of(
                format!("tabulate[{}]({})", self.len_text(rest), e.s),
                e.b,
                false,
                &[&e],
            )
        };
        let (a, b) = if self.rng.chance(0.5) {
            (&head, &tail)
        } else {
            (&tail, &head)
        };
        let e = Ex::of(
            format!("concat({}, {})", a.s, b.s),
            a.b.max(b.b),
            false,
            &[a, b],
        )
        .not_ts();
        tag("concat", &e.s);
        tag(
            match ty {
                Ty::Mt(..) => "concat: rows of matrices",
                _ => "concat: vectors",
            },
            &e.s,
        );
        if self.in_long > 0 {
            tag("reverse or concat in a loop's step", &e.s);
        }
        Some(e)
    }

    /// Whether a `scan` may be written here: where a long `iterate` may
    /// (`long_ok`), also in the step of a loop (a long `iterate` or a
    /// scan) that is not inside another.
    fn scan_ok(&self) -> bool {
        self.tab.is_none() && !self.no_tabulate && self.in_long <= 1 && self.no_long == 0
    }

    /// `scan(xs, init, (q, e) => step)` of type `ty` (not a matrix): a loop
    /// over the rows of a sequence that no derivative takes (a parameter of
    /// `seqs`, sometimes transposed, reversed or mapped), with a scalar, a
    /// vector (summed for a scalar) or a tuple state. With literal sizes,
    /// sometimes an unrolled scan instead (`unrolled_scan`).
    fn scan_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if !self.scan_ok() || matches!(ty, Ty::Mt(..)) {
            return None;
        }
        // In a loop's step, a sequence the loop carries along its state.
        let vis = self.visible();
        let seqs: Vec<(String, Ty)> = self
            .seqs
            .iter()
            .filter(|(nm, t)| {
                vis.iter()
                    .any(|&i| self.env[i].name == *nm && self.env[i].ty == *t)
            })
            .cloned()
            .collect();
        if self.lit.is_some() && (seqs.is_empty() || self.rng.chance(0.3)) {
            return self.unrolled_scan(ty, d);
        }
        if seqs.is_empty() {
            return None;
        }
        let (name, mut sty) = self.rng.pick(&seqs);
        self.mark_used(&name);
        let mut seq = name.clone();
        if let Ty::Mt(r, c) = sty {
            if self.rng.chance(0.3) {
                seq = format!("transpose({seq})");
                sty = Ty::Mt(c, r);
            }
        }
        let reversed = self.rng.chance(0.2);
        let rotated = !reversed && sty.lead() == Some(D::N) && self.rng.chance(0.15);
        seq = match self.rng.below(5) {
            _ if reversed => format!("reverse({seq})"),
            // Rotated by one row: `concat` of its rows 1.. and row 0.
            _ if rotated => {
                let i = self.fresh("i");
                format!(
                    "concat(tabulate[{}]({i} => {seq}[{i} + 1]), tabulate[1]({i} => {seq}[{i}]))",
                    self.dim(D::N1)
                )
            }
            0 => format!("tanh({seq} * 2)"),
            1 => format!("sin({seq})"),
            _ => seq,
        };
        let row = sty.row()?;
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let comps: Vec<Ty> = match ty {
            Ty::S => match self.rng.below(4) {
                0 if !vectors.is_empty() => vec![self.rng.pick(&vectors)],
                1 if !vectors.is_empty() => vec![self.rng.pick(&vectors), Ty::S],
                2 => vec![Ty::S, Ty::S],
                _ => vec![Ty::S],
            },
            Ty::V(_) => match self.rng.below(4) {
                0 => vec![ty, Ty::S],
                1 => vec![ty, ty],
                _ => vec![ty],
            },
            Ty::Mt(..) => return None,
        };
        let steps = sty.lead().map_or(1.0, dim_max);
        let (text, bounds, vars, read) = self.scan_of(&seq, row, true, &comps, steps, true, d);
        tag("scan (a loop over a sequence)", &text);
        tag(
            if row == Ty::S {
                "scan: over a vector"
            } else {
                "scan: over a matrix"
            },
            &text,
        );
        tag(
            match (comps.len(), comps[0]) {
                (1, Ty::S) => "scan: scalar state",
                (1, _) => "scan: vector state",
                _ => "scan: tuple state",
            },
            &text,
        );
        if read {
            tag("scan: reads values from outside", &text);
        }
        if reversed {
            tag("scan: reversed sequence", &text);
        }
        if rotated {
            tag("scan: sequence made by concat", &text);
        }
        if self.in_long > 0 {
            tag("scan: inside a loop's step", &text);
        }
        Some(self.untuple(text, &comps, &bounds, &vars, ty))
    }

    /// A `scan` whose state no loop can carry (two vectors of different
    /// lengths), over a sequence of integer length (literal sizes): egrad
    /// unrolls it, and then differentiates with respect to the sequence
    /// too, so the sequence is any value (often of differentiated
    /// parameters) and the step reads anything in scope.
    fn unrolled_scan(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let avail = self.avail();
        let arrays: Vec<Ty> = avail.iter().copied().filter(|t| t.is_array()).collect();
        let vectors: Vec<Ty> = avail
            .iter()
            .copied()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let other = |g: &Self, a: Ty| -> Vec<Ty> {
            vectors
                .iter()
                .copied()
                .filter(|&b| match (a, b) {
                    (Ty::V(x), Ty::V(y)) => g.known_len(x) != g.known_len(y),
                    _ => false,
                })
                .collect()
        };
        let comps = match ty {
            Ty::S => {
                let firsts: Vec<Ty> = vectors
                    .iter()
                    .copied()
                    .filter(|&a| !other(self, a).is_empty())
                    .collect();
                if firsts.is_empty() {
                    return None;
                }
                let a = self.rng.pick(&firsts);
                let b = self.rng.pick(&other(self, a));
                vec![a, b]
            }
            Ty::V(_) => {
                let bs = other(self, ty);
                if bs.is_empty() {
                    return None;
                }
                vec![ty, self.rng.pick(&bs)]
            }
            Ty::Mt(..) => return None,
        };
        if arrays.is_empty() {
            return None;
        }
        let sty = self.rng.pick(&arrays);
        let seq = self.gen(sty, d.min(2));
        let seq = self.fit(seq, 1.0);
        let row = sty.row()?;
        let steps = sty.lead().map_or(1.0, dim_max);
        let (text, bounds, vars, _) = self.scan_of(&seq.s, row, seq.var, &comps, steps, false, d);
        tag("scan: unrolled (a state of mixed shapes)", &text);
        Some(self.untuple(text, &comps, &bounds, &vars, ty))
    }

    /// The text of `scan(seq, init, (q, e) => step)` over a sequence of at
    /// most `steps` rows of type `row` (generically distinct elements if
    /// `row_var`), with state components `comps` (a
    /// tuple if more than one, taken apart with `let (a, b) = q` in the
    /// step): the text, each component's bound and `var`, and whether the
    /// step reads values from outside. Where the scan is a loop (`carry`)
    /// the step reads only what a loop carries along its state (see
    /// `enter_step`). Each component relaxes towards a generated value or
    /// drifts by at most h a step, as in `loop_of`; a step that does not
    /// read its row is made to.
    #[allow(clippy::too_many_arguments)]
    fn scan_of(
        &mut self,
        seq: &str,
        row: Ty,
        row_var: bool,
        comps: &[Ty],
        steps: f64,
        carry: bool,
        d: u32,
    ) -> (String, Vec<f64>, Vec<bool>, bool) {
        let mut inits = Vec::new();
        for &t in comps {
            let mut e = self.gen(t, d);
            if e.k {
                let s = self.dynamic_scalar();
                e = Ex::of(format!("({} + {})", e.s, s.s), e.b + s.b, e.var, &[&e, &s]);
            }
            inits.push(e);
        }
        let h = self.rng.pick(&[0.25, 0.5, 0.75]);
        let forms: Vec<usize> = comps.iter().map(|_| self.rng.below(3)).collect();
        let bounds: Vec<f64> = inits
            .iter()
            .zip(&forms)
            .map(|(e, &f)| {
                if f == 2 {
                    e.b + h * steps
                } else {
                    e.b.max(1.0)
                }
            })
            .collect();
        let leaf = comps
            .iter()
            .copied()
            .find(|t| t.is_array())
            .unwrap_or(Ty::S);
        let saved = carry.then(|| self.enter_step(leaf));
        let mark = self.env.len();
        let q = self.fresh("q");
        let names: Vec<String> = if comps.len() == 1 {
            vec![q.clone()]
        } else {
            comps.iter().map(|_| self.fresh("q")).collect()
        };
        for (k, name) in names.iter().enumerate() {
            let e = Ex::leaf(name.clone(), bounds[k], inits[k].var);
            self.push_var(name, &e, comps[k]);
        }
        let e = self.fresh("e");
        self.push_var(
            &e,
            &Ex::leaf(e.clone(), 1.0, row_var && row.is_array()),
            row,
        );
        let row_at = self.env.len() - 1;
        self.in_long += 1;
        let mut fs: Vec<Ex> = Vec::new();
        for &t in comps {
            let dd = self.rng.range(1, 3) as u32;
            fs.push(self.gen(t, dd));
        }
        self.in_long -= 1;
        if !self.env[row_at].used {
            let f = &fs[0];
            let (text, b) = match (comps[0], row) {
                (Ty::V(a), Ty::V(c)) if a == c => (format!("({} .* {e})", f.s), f.b),
                (_, Ty::V(c)) => (format!("({} + +/{e})", f.s), f.b + dim_max(c)),
                _ => (format!("({} + {e})", f.s), f.b + 1.0),
            };
            fs[0] = Ex::of(text, b, f.var, &[f]);
        }
        let mut steps = Vec::new();
        let mut vars = Vec::new();
        for (k, f) in fs.into_iter().enumerate() {
            let q = &names[k];
            vars.push(inits[k].var && f.var);
            let text = match forms[k] {
                0 => {
                    let f = self.fit(f, bounds[k]);
                    format!("({q} + {h} * ({} - {q}))", f.s)
                }
                1 => {
                    let f = self.fit(f, bounds[k]);
                    format!("({q} - {h} * ({q} - {}))", f.s)
                }
                _ => format!("({q} + {h} * tanh({}))", f.s),
            };
            steps.push(text);
        }
        self.env.truncate(mark);
        let read = match saved {
            Some((saved, keep)) => !self.leave_step(saved, keep).is_empty(),
            None => false,
        };
        let text = if comps.len() == 1 {
            format!("scan({seq}, {}, ({q}, {e}) => {})", inits[0].s, steps[0])
        } else {
            let inits: Vec<&str> = inits.iter().map(|e| e.s.as_str()).collect();
            format!(
                "scan({seq}, ({}), ({q}, {e}) => {{ let ({}) = {q}; ({}) }})",
                inits.join(", "),
                names.join(", "),
                steps.join(", ")
            )
        };
        (text, bounds, vars, read)
    }

    /// The value of type `ty` of a scan (or loop) `text` whose state has the
    /// components `comps`: itself (summed for a scalar), or for a tuple
    /// one component or two combined.
    fn untuple(&mut self, text: String, comps: &[Ty], bounds: &[f64], vars: &[bool], ty: Ty) -> Ex {
        // A component as a value of type `ty` (a vector summed for a scalar).
        let as_ty = |name: &str, k: usize| -> (String, f64, bool) {
            if ty == Ty::S && comps[k] != Ty::S {
                (format!("(+/{name})"), comps[k].len_max() * bounds[k], false)
            } else {
                (name.to_string(), bounds[k], vars[k])
            }
        };
        let e = if comps.len() == 1 {
            let (s, b, var) = as_ty(&text, 0);
            Ex::leaf(s, b, var)
        } else {
            let names: Vec<String> = comps.iter().map(|_| self.fresh("t")).collect();
            let (a, b) = (as_ty(&names[0], 0), as_ty(&names[1], 1));
            // For a vector, the second component is a scalar or a vector of
            // its type (or, unrolled, another length: not alone, not combined).
            let second_ok = ty == Ty::S || comps[1] == ty;
            let combine = ty == Ty::S || comps[1] == ty || comps[1] == Ty::S;
            let (combo, bound, var) = match self.rng.below(4) {
                1 if second_ok => b,
                2 if combine => (format!("({} + {})", a.0, b.0), a.1 + b.1, a.2 || b.2),
                3 if combine => (format!("({} * {})", a.0, b.0), a.1 * b.1, false),
                _ => a,
            };
            Ex::leaf(
                format!("({{ let ({}) = {text}; {combo} }})", names.join(", ")),
                bound,
                var,
            )
        };
        e.not_ts()
    }

    /// Two operands, the second regenerated if it is the same text.
    fn distinct(&mut self, ta: Ty, tb: Ty, d: u32) -> (Ex, Ex) {
        let a = self.gen(ta, d);
        let mut b = self.gen(tb, d);
        for _ in 0..4 {
            if b.s != a.s {
                break;
            }
            b = self.gen(tb, d);
        }
        if b.s == a.s {
            b = Ex::lit(0.75);
        }
        (a, b)
    }

    /// Operand types for an element-wise op giving `ty`: (left, right).
    fn operand_types(&mut self, ty: Ty, rows: bool) -> (Ty, Ty) {
        let other = match ty {
            Ty::S => Ty::S,
            Ty::V(_) => {
                if self.rng.chance(0.3) {
                    Ty::S
                } else {
                    ty
                }
            }
            Ty::Mt(_, c) => {
                let r = self.rng.below(10);
                if r < 3 {
                    Ty::S
                } else if r < 5 && rows && self.avail().contains(&Ty::V(c)) {
                    Ty::V(c)
                } else {
                    ty
                }
            }
        };
        if self.rng.chance(0.5) {
            (ty, other)
        } else {
            (other, ty)
        }
    }

    fn binary(&mut self, ty: Ty, d: u32) -> Ex {
        let (ta, tb) = self.operand_types(ty, true);
        let row_bcast = ta != tb && ta != Ty::S && tb != Ty::S;
        let var_of = |a: &Ex, _: Ty, b: &Ex, _: Ty| a.var || b.var;
        let r = self.rng.below(10);
        let mut e = if r < 7 {
            let (a, b) = self.distinct(ta, tb, d);
            let arrays = ta.is_array() && tb.is_array();
            let (op, bound) = match self.rng.below(4) {
                0 => ("+", a.b + b.b),
                1 => ("-", a.b + b.b),
                _ => (
                    if arrays && self.rng.chance(0.5) {
                        ".*"
                    } else {
                        "*"
                    },
                    a.b * b.b,
                ),
            };
            let var = var_of(&a, ta, &b, tb);
            Ex::of(format!("({} {op} {})", a.s, b.s), bound, var, &[&a, &b])
        } else {
            // A division by something provably away from zero.
            let (a, b) = self.distinct(ta, tb, d);
            let slash = if self.rng.chance(0.3) { "./" } else { "/" };
            let den = match self.rng.below(4) {
                0 => format!("(1 + {b} * {b})", b = b.s),
                1 => format!("(2 + sin({}))", b.s),
                2 => format!("(1.5 + tanh({}))", b.s),
                _ => format!("sqrt(1 + {b} * {b})", b = b.s),
            };
            let var = var_of(&a, ta, &b, tb);
            let bound = a.b * 2.0;
            Ex::of(format!("({} {slash} {den})", a.s), bound, var, &[&a, &b])
        };
        if row_bcast {
            e.ts = false;
        }
        e
    }

    fn math(&mut self, ty: Ty, d: u32) -> Ex {
        let a = self.gen(ty, d);
        let v = a.var;
        let s = &a.s;
        let (text, b) = match self.rng.below(14) {
            0 => (format!("(-{s})"), a.b),
            1 => (format!("tanh({s})"), a.b.min(1.0)),
            2 => (format!("sin({s})"), 1.0),
            3 => (format!("cos({s})"), 1.0),
            4 => (format!("exp(tanh({s}))"), std::f64::consts::E),
            5 => (format!("exp({s} * 0.25)"), (a.b * 0.25).exp()),
            6 => (format!("log(1 + {s} * {s})"), (1.0 + a.b * a.b).ln()),
            7 => (format!("sqrt(1 + {s} * {s})"), (1.0 + a.b * a.b).sqrt()),
            8 => (format!("log1p({s} * {s})"), (1.0 + a.b * a.b).ln()),
            9 => (format!("expm1(tanh({s}))"), 1.72),
            10 => {
                let a2 = self.fit(a.clone(), 3.0);
                let s2 = &a2.s;
                return Ex::of(
                    format!("pow(1 + {s2} * {s2}, 1.5)"),
                    (1.0 + a2.b * a2.b).powf(1.5),
                    v,
                    &[&a2],
                );
            }
            11 => (format!("abs({s})"), a.b),
            12 => (format!("tan(tanh({s}) * 0.5)"), 0.55),
            _ => (format!("sqrt(exp(tanh({s})))"), 1.65),
        };
        Ex::of(text, b, v, &[&a])
    }

    fn maxmin(&mut self, ty: Ty, d: u32) -> Ex {
        let f = if self.rng.chance(0.5) { "max" } else { "min" };
        let (ta, tb) = self.operand_types(ty, false);
        let (a, b) = if self.rng.chance(0.2) {
            let a = self.gen(ty, d);
            (a, Ex::lit(self.rng.pick(LITS)))
        } else {
            self.distinct(ta, tb, d)
        };
        let (a, b) = if self.rng.chance(0.5) { (a, b) } else { (b, a) };
        let arrays_var = |e: &Ex| e.var && !e.k && e.s.parse::<f64>().is_err();
        let var = arrays_var(&a) && arrays_var(&b) && ta == tb;
        Ex::of(
            format!("{f}({}, {})", a.s, b.s),
            a.b.max(b.b),
            var,
            &[&a, &b],
        )
    }

    /// A dynamic condition of shape `shape` (S or the array type).
    fn cond(&mut self, shape: Ty, d: u32) -> Cond {
        let r = self.rng.below(10);
        if r < 3 {
            let d = d.saturating_sub(1);
            let a = self.cond(shape, d);
            let b_shape = if shape != Ty::S && self.rng.chance(0.3) {
                Ty::S
            } else {
                shape
            };
            let b = self.cond(b_shape, d);
            let op = if self.rng.chance(0.5) { "&&" } else { "||" };
            return Cond {
                s: format!("({} {op} {})", a.s, b.s),
                tab: a.tab || b.tab,
                ts: a.ts && b.ts,
            };
        }
        if r == 3 {
            let a = self.cond(shape, d.saturating_sub(1));
            return Cond {
                s: format!("!{}", a.s),
                ..a
            };
        }
        let (ta, tb) = if shape == Ty::S {
            (Ty::S, Ty::S)
        } else {
            self.operand_types(shape, false)
        };
        let dd = d.min(2);
        let (mut a, mut b) = self.distinct(ta, tb, dd);
        if a.k && b.k {
            // Make it dynamic.
            a = self.dynamic_scalar();
            if a.s == b.s {
                b = Ex::lit(0.125);
            }
        }
        let op = self.rng.pick(&["<", "<=", ">", ">=", "<", ">", "!="]);
        Cond {
            s: format!("({} {op} {})", a.s, b.s),
            tab: a.tab || b.tab,
            ts: a.ts && b.ts,
        }
    }

    /// A scalar that is not known at compile time.
    fn dynamic_scalar(&mut self) -> Ex {
        for _ in 0..20 {
            let e = self.leaf(Ty::S);
            if !e.k {
                return e;
            }
        }
        // Every context has an array or a scalar parameter.
        let vis = self.visible();
        for i in vis {
            let v = self.env[i].clone();
            if v.k {
                continue;
            }
            match v.ty {
                Ty::S => return self.use_var(i),
                Ty::V(_) | Ty::Mt(..) => {
                    self.env[i].used = true;
                    return Ex::leaf(format!("(+/{})", v.name), v.b * v.ty.len_max(), false)
                        .not_ts();
                }
            }
        }
        panic!("generator: no dynamic scalar");
    }

    fn if_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let cshape = if ty != Ty::S && self.rng.chance(0.5) {
            ty
        } else {
            Ty::S
        };
        let c = self.cond(cshape, d.min(2));
        // Branch kinds: 0 the result type, 1 a scalar, 2 a literal.
        let kind = |g: &mut Self| {
            if ty != Ty::S && g.rng.chance(0.3) {
                if g.rng.chance(0.4) {
                    2
                } else {
                    1
                }
            } else {
                0
            }
        };
        let (mut ka, kb) = (kind(self), kind(self));
        // With a scalar condition one branch must have the array type.
        if ty != Ty::S && cshape == Ty::S && ka != 0 && kb != 0 {
            ka = 0;
        }
        let branch = |g: &mut Self, k: u32| -> Ex {
            match k {
                0 => g.gen(ty, d),
                1 => g.gen(Ty::S, d),
                _ => Ex::lit(g.rng.pick(LITS)),
            }
        };
        let a = branch(self, ka);
        let b = branch(self, kb);
        let var = a.var && b.var && ka == 0 && kb == 0;
        let mut e = Ex::of(
            format!("(if {} {{ {} }} else {{ {} }})", c.s, a.s, b.s),
            a.b.max(b.b),
            var,
            &[&a, &b],
        );
        e.k = false;
        e.tab |= c.tab;
        e.ts &= c.ts;
        Some(e)
    }

    /// `if u > t { sqrt(u) } else { ... }`: the untaken branch is NaN.
    fn safe_branch(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let a = self.gen(ty, d);
        if a.k {
            return None;
        }
        let u = self.fresh("u");
        let (f, thr, b) = if self.rng.chance(0.5) {
            ("sqrt", 0.25, a.b.sqrt().max(a.b * 0.5))
        } else {
            ("log", 0.5, a.b.ln().max(0.7).max(a.b * 0.5))
        };
        Some(Ex::of(
            format!(
                "({{ let {u} = {}; if {u} > {thr} {{ {f}({u}) }} else {{ {u} * 0.5 }} }})",
                a.s
            ),
            b,
            a.var,
            &[&a],
        ))
    }

    fn block(&mut self, ty: Ty, d: u32) -> Ex {
        let avail = self.avail();
        let t1 = if self.rng.chance(0.5) {
            ty
        } else {
            self.rng.pick(&avail)
        };
        let v = self.gen(t1, d);
        let name = self.fresh("u");
        let mark = self.env.len();
        self.push_var(&name, &v, t1);
        let body = self.gen(ty, d);
        // (`leaf` marks every name of the type it wants used, also when it
        // picks another leaf: a body `0.75` may seem to use the name, and
        // the block to depend on the index of a `tabulate` it is in. Read
        // from the text in the programs with run-time integers; the others
        // keep the programs they had.)
        let used = self.env[mark].used && (self.ints.is_empty() || body.s.contains(&name));
        self.env.truncate(mark);
        let mut e = Ex::of(
            format!("({{ let {name} = {}; {} }})", v.s, body.s),
            body.b,
            body.var,
            &[&v, &body],
        );
        if !used {
            e.tab = body.tab;
            e.k = body.k;
        } else {
            e.k = body.k && v.k;
        }
        e
    }

    /// A call of a helper whose (mapped) result type is `ty`.
    fn call(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        self.call_where(Some(ty), false, d).map(|r| r.0)
    }

    /// A call of some helper (a derivative one if `deriv` and there is
    /// one), and its type.
    fn call_any(&mut self, deriv: bool, d: u32) -> Option<(Ex, Ty)> {
        self.call_where(None, deriv, d)
    }

    fn call_where(&mut self, want: Option<Ty>, deriv: bool, d: u32) -> Option<(Ex, Ty)> {
        let avail = self.avail();
        let mut options = Vec::new();
        // A helper that runs a loop is not called inside `tabulate` (not
        // supported) or a loop's step (the loops' costs would multiply).
        let loop_ok = self.tab.is_none() && !self.no_tabulate && self.in_long == 0;
        for (hi, h) in self.helpers.iter().enumerate() {
            if h.rets.len() != 1 || (h.has_loop && !loop_ok) {
                continue;
            }
            if self.only_rt && !h.params.iter().any(|p| matches!(p, HParam::RunCount(_))) {
                continue;
            }
            // A user primitive is not written in the text of a `tabulate`
            // body (nor a helper calling one).
            if (h.prim && (self.tab.is_some() || self.no_tabulate)) || (self.only_prim && !h.prim) {
                continue;
            }
            if self.only_helper.as_ref().is_some_and(|n| *n != h.name) {
                continue;
            }
            // A helper taking `kind: i64[N]` is passed the loss's, outside
            // loops' steps (which read only what a loop carries).
            let kind = h.params.iter().any(|p| matches!(p, HParam::Kind));
            if kind && !(self.mparams.contains(&"kind") && self.in_long == 0) {
                continue;
            }
            for mn in ALL_DIMS {
                for mk in ALL_DIMS {
                    if h.uses_n1 && (mn != D::N || self.n_min < 2) {
                        continue;
                    }
                    if kind && mn != D::N {
                        continue;
                    }
                    let f = move |x: D| -> Option<D> {
                        match x {
                            D::N => Some(mn),
                            D::M => Some(mk),
                            D::N1 => (mn == D::N).then_some(D::N1),
                        }
                    };
                    let Some(rt) = h.rets[0].map(&f) else {
                        continue;
                    };
                    if want.is_some_and(|ty| rt != ty) || !avail.contains(&rt) {
                        continue;
                    }
                    let mut ok = true;
                    let mut tys = Vec::new();
                    for p in &h.params {
                        if let HParam::Dyn(t) = p {
                            match t.map(&f) {
                                Some(t) if avail.contains(&t) => tys.push(t),
                                _ => ok = false,
                            }
                        }
                    }
                    if ok {
                        options.push((hi, tys, rt));
                    }
                }
            }
        }
        self.only_rt = false;
        self.only_helper = None;
        self.only_prim = false;
        if deriv && options.iter().any(|o| self.helpers[o.0].b.is_infinite()) {
            options.retain(|o| self.helpers[o.0].b.is_infinite());
        }
        if options.is_empty() {
            return None;
        }
        let (hi, tys, ty) = self.rng.pick(&options);
        let h = self.helpers[hi].clone();
        self.made_loop |= h.has_loop;
        self.made_prim |= h.prim;
        self.made_kernel |= h.kernel;
        let mut args = Vec::new();
        let mut parts = Vec::new();
        let mut k = 0;
        for p in &h.params {
            match p {
                HParam::Dyn(_) => {
                    let t = tys[k];
                    k += 1;
                    let mut a = self.gen(t, d);
                    if (a.tab && !h.ts) || (h.needs_var && t.is_array() && !a.var) {
                        a = self.hoist(|g| g.gen(t, d));
                        if h.needs_var && t.is_array() && !a.var {
                            a = self.hoist(|g| g.leaf(t));
                        }
                    }
                    if a.b > LIMIT {
                        a = self.bounded(a);
                    }
                    args.push(a.s.clone());
                    parts.push(a);
                }
                HParam::StaticInt => {
                    let n = self.rng.below(4);
                    args.push(match self.rng.below(3) {
                        0 if n >= 1 => format!("{} + 1", n - 1),
                        1 if n >= 1 => format!("2 * {n} - {n}"),
                        _ => n.to_string(),
                    });
                }
                HParam::StaticReal => args.push(fmt_lit(self.rng.pick(LITS))),
                HParam::Depth => args.push(self.rng.range(1, 5).to_string()),
                // (Not `n` in a short `iterate`'s step or condition: with a
                // count of 0 the call is dropped, and the loss would not run
                // the loop of count `n` its text has.)
                HParam::RunCount(most) => match self.rt_count {
                    Some(_) if self.no_long == 0 && self.rng.chance(0.7) => args.push("n".into()),
                    _ => {
                        // A literal count, up to the count the helper's
                        // step size is made for.
                        let k = self.rng.pick(&[0, 1, 3, *most]);
                        tag(
                            "run-time count passed a literal",
                            &format!("{}({k}, ", h.name),
                        );
                        args.push(k.to_string());
                    }
                },
                HParam::StaticBool => args.push(
                    self.rng
                        .pick(&["true", "false", "1 < 2", "2.5 <= 1"])
                        .to_string(),
                ),
                HParam::Kind => {
                    tag(MATCH_TAGS[13], &format!("{}(kind, ", h.name));
                    args.push("kind".into());
                }
                HParam::Key => {
                    let k = self.key_text();
                    args.push(k);
                }
            }
        }
        if h.generic && parts.iter().all(|a| a.k) {
            // `T` is inferred from a typed argument, not from numbers.
            if let Some(k) = h
                .params
                .iter()
                .position(|p| matches!(p, HParam::Dyn(Ty::S)))
            {
                let a = self.dynamic_scalar();
                args[k] = a.s.clone();
                parts.push(a);
            }
        }
        let refs: Vec<&Ex> = parts.iter().collect();
        let text = format!("{}({})", h.name, args.join(", "));
        if h.generic && self.m_name == "M" {
            tag("generic helper called from the loss", &text);
        }
        if h.params.iter().any(|p| matches!(p, HParam::Depth)) {
            tag("static recursion (called with a literal depth)", &text);
        }
        if h.params.iter().any(|p| matches!(p, HParam::Key)) {
            tag(KEY_TAGS[9], &text);
        }
        self.prim_tags(&h, &text);
        let mut e = Ex::of(text, h.b, false, &refs);
        e.ts &= h.ts;
        e.k = false;
        Some((self.bounded(e), ty))
    }

    /// `iterate(n, init, q => step)`.
    fn iterate(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut init = self.gen(ty, d);
        if init.k {
            init = self.dynamic_scalar();
        }
        let count = match &self.static_count {
            Some(n) if self.rng.chance(0.7) => {
                if self.rng.chance(0.5) {
                    n.clone()
                } else {
                    format!("{n} + 1")
                }
            }
            _ => self.rng.below(4).to_string(),
        };
        let q = self.fresh("q");
        let in_tab = matches!(ty, Ty::Mt(..)) && self.no_tabulate;
        if in_tab {
            self.tab_states.push(q.clone());
        }
        let bound = init.b.max(1.0);
        let mark = self.env.len();
        let mut qe = init.clone();
        qe.b = bound;
        // Inside `tabulate` the state may depend on the index after a step.
        qe.tab |= self.tab.is_some();
        self.push_var(&q, &qe, ty);
        self.no_long += 1;
        let mut step = self.gen(ty, d);
        self.no_long -= 1;
        if !self.env[mark].used {
            let op = self.rng.pick(&["+", "-", "*"]);
            let b = if op == "*" {
                bound * step.b
            } else {
                bound * 0.5 + step.b
            };
            let k = if op == "*" { "" } else { " * 0.5" };
            step = Ex::of(format!("({q}{k} {op} {})", step.s), b, step.var, &[&step]);
            step.tab |= qe.tab;
        }
        self.env.truncate(mark);
        let step = self.fit(step, bound);
        // `iterate_until` selects between the state and its step.
        let until = self.rng.chance(0.3);
        if until {
            let qd = self.fresh("q");
            if in_tab {
                self.tab_states.push(qd.clone());
            }
            let mark = self.env.len();
            self.push_var(&qd, &qe, ty);
            let shape = if ty != Ty::S && self.rng.chance(0.3) {
                ty
            } else {
                Ty::S
            };
            self.no_long += 1;
            let c = self.cond(shape, 1);
            self.no_long -= 1;
            self.env.truncate(mark);
            let mut e = Ex::of(
                format!(
                    "iterate_until({count}, {}, {qd} => {}, {q} => {})",
                    init.s, c.s, step.s
                ),
                bound,
                false,
                &[&init, &step],
            );
            e.k = false;
            e.tab |= c.tab;
            e.ts &= c.ts;
            return Some(e);
        }
        let mut e = Ex::of(
            format!("iterate({count}, {}, {q} => {})", init.s, step.s),
            bound,
            init.var && step.var,
            &[&init, &step],
        );
        e.k = false;
        Some(e)
    }

    /// Whether a long `iterate` (a loop) may be written here: not in
    /// `tabulate` (it would be unrolled), not in a short `iterate`'s step,
    /// at most one loop inside another.
    fn long_ok(&self) -> bool {
        self.tab.is_none() && !self.no_tabulate && self.no_long == 0 && self.in_long <= 1
    }

    /// Enter a loop's step whose state has type `leaf`: only the names a
    /// loop can carry along its state stay in scope (of the state's type,
    /// and scalars next to a vector state), as they are and unused. Returns
    /// the whole environment and the indices kept, for `leave_step`.
    fn enter_step(&mut self, leaf: Ty) -> (Vec<Var>, Vec<usize>) {
        let mut keep: Vec<usize> = self
            .visible()
            .into_iter()
            .filter(|&i| {
                let t = self.env[i].ty;
                t == leaf || (t == Ty::S && matches!(leaf, Ty::V(_)))
            })
            .collect();
        keep.sort_unstable();
        let saved = std::mem::take(&mut self.env);
        self.env = keep
            .iter()
            .map(|&i| Var {
                used: false,
                ..saved[i].clone()
            })
            .collect();
        (saved, keep)
    }

    /// Back from a loop's step: the names it read are used. Returns their
    /// types (what the loop reads from outside).
    fn leave_step(&mut self, mut saved: Vec<Var>, keep: Vec<usize>) -> Vec<Ty> {
        let mut read = Vec::new();
        for (j, &i) in keep.iter().enumerate() {
            if self.env[j].used {
                saved[i].used = true;
                read.push(saved[i].ty);
            }
        }
        self.env = saved;
        read
    }

    /// An expression of type `ty` (not a matrix) with a long `iterate` in it.
    fn with_loop(&mut self, ty: Ty, d: u32) -> Ex {
        let Some(l) = self.long_iterate(ty, d) else {
            return self.gen(ty, d);
        };
        if self.rng.chance(0.5) {
            return self.bounded(l);
        }
        let o = self.gen(ty, d.saturating_sub(1));
        let (op, b) = match self.rng.below(3) {
            0 => ("+", l.b + o.b),
            1 => ("-", l.b + o.b),
            _ => ("*", l.b * o.b),
        };
        let (a, c) = if self.rng.chance(0.5) {
            (&l, &o)
        } else {
            (&o, &l)
        };
        let e = Ex::of(
            format!("({} {op} {})", a.s, c.s),
            b,
            l.var || o.var,
            &[a, c],
        );
        self.bounded(e)
    }

    /// A long `iterate` of type `ty` (not a matrix), which egrad lowers to
    /// a loop: a scalar state, a tuple of scalars, a vector state (summed
    /// for a scalar), or a tuple of vectors; sometimes with a loop inside
    /// its step.
    fn long_iterate(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if !self.long_ok() {
            return None;
        }
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let (leaf, comps, sum) = match ty {
            Ty::S => match self.rng.below(3) {
                0 if !vectors.is_empty() => {
                    let v = self.rng.pick(&vectors);
                    (v, if self.rng.chance(0.2) { 2 } else { 1 }, true)
                }
                1 => (Ty::S, self.rng.range(2, 4), false),
                _ => (Ty::S, 1, false),
            },
            Ty::V(_) => (ty, if self.rng.chance(0.25) { 2 } else { 1 }, false),
            Ty::Mt(..) => return None,
        };
        self.made_loop = true;
        let (text, bounds, vars) = self.loop_of(leaf, comps, d);
        let len = leaf.len_max();
        if comps == 1 {
            let e = if sum {
                Ex::leaf(format!("(+/{text})"), len * bounds[0], false)
            } else {
                Ex::leaf(text, bounds[0], vars[0])
            };
            return Some(e.not_ts());
        }
        // A tuple state: one component, or two combined.
        let names: Vec<String> = (0..comps).map(|_| self.fresh("t")).collect();
        let (i, j) = (self.rng.below(comps), self.rng.below(comps));
        let (mut combo, mut b, var) = match self.rng.below(3) {
            _ if i == j => (names[i].clone(), bounds[i], vars[i]),
            0 => (
                format!("({} + {})", names[i], names[j]),
                bounds[i] + bounds[j],
                vars[i] || vars[j],
            ),
            1 => (
                format!("({} - {})", names[i], names[j]),
                bounds[i] + bounds[j],
                vars[i] || vars[j],
            ),
            _ => (
                format!("({} * {})", names[i], names[j]),
                bounds[i] * bounds[j],
                false,
            ),
        };
        if sum {
            combo = format!("(+/{combo})");
            b *= len;
        }
        let text = format!("({{ let ({}) = {text}; {combo} }})", names.join(", "));
        Some(Ex::leaf(text, b, var && !sum).not_ts())
    }

    /// `iterate(#C#, init, q => step)` with `comps` state components of
    /// type `leaf` (a tuple if more than one): the text, each component's
    /// bound and `var`. The count and the step size are placeholders that
    /// `calibrate` fills in. Each component relaxes towards a generated
    /// value (`q + h * (f - q)` or `q - h * (q - f)`, bounded by the larger
    /// of the initial value and `f`) or drifts (`q + h * tanh(f)`, by at
    /// most count × h in all), so nothing blows up or vanishes. Where `f`
    /// is `q` a relaxing state stays exactly `q` (with `(1 - h) * q + h * f`
    /// rounding would break ties the step keeps, such as `q != v` with `q`
    /// starting at `v`, at some inputs and not at others).
    fn loop_of(&mut self, leaf: Ty, comps: usize, d: u32) -> (String, Vec<f64>, Vec<bool>) {
        let hc = self.rng.pick(&[0.5, 1.0, 2.0]);
        let nest = self.in_long == 0 && self.nest_left > 0;
        // count × step statements aimed at: above what egrad unrolls, and
        // lower with a loop in a loop (the costs multiply).
        let factor = if nest || self.in_long > 0 {
            self.rng.uniform(1.02, 1.1)
        } else {
            self.rng.uniform(1.2, 2.0)
        };
        // A run-time count (`n`): only a loop that is not inside a loop and
        // runs none itself (its cost is count × step for any count).
        let runtime = match self.rt_count {
            Some(c) if self.in_long == 0 && !nest && self.rng.chance(0.85) => Some(c),
            _ => None,
        };
        let id = LONGS.with(|l| {
            let mut l = l.borrow_mut();
            l.push(LongIt {
                hc,
                target: factor * UNROLL_STMTS as f64,
                runtime,
            });
            l.len() - 1
        });
        // The initial state, from anything in scope, not known at compile
        // time (a constant state would be unrolled step by step).
        let mut inits = Vec::new();
        for _ in 0..comps {
            let mut e = self.gen(leaf, d);
            if e.k {
                let s = self.dynamic_scalar();
                e = Ex::of(format!("({} + {})", e.s, s.s), e.b + s.b, e.var, &[&e, &s]);
            }
            inits.push(e);
        }
        let forms: Vec<usize> = (0..comps).map(|_| self.rng.below(3)).collect();
        let bounds: Vec<f64> = inits
            .iter()
            .zip(&forms)
            .map(|(e, &f)| if f == 2 { e.b + hc } else { e.b.max(1.0) })
            .collect();
        let names: Vec<String> = (0..comps).map(|_| self.fresh("q")).collect();
        let (saved, keep) = self.enter_step(leaf);
        for (k, name) in names.iter().enumerate() {
            let q = Ex::leaf(name.clone(), bounds[k], inits[k].var);
            self.push_var(name, &q, leaf);
        }
        self.in_long += 1;
        if nest {
            self.nest_left -= 1;
        }
        if runtime.is_some() {
            self.no_long += 1;
        }
        let mut steps = Vec::new();
        let mut vars = Vec::new();
        for (k, q) in names.iter().enumerate() {
            // Heavier steps where a loop is nested: fewer steps for the same
            // number of statements, which is what makes a loop.
            let dd = if self.in_long > 1 || nest {
                self.rng.range(2, 4)
            } else {
                self.rng.range(1, 3)
            } as u32;
            let inner = if nest && k == 0 {
                self.long_iterate(leaf, dd)
            } else {
                None
            };
            // Where loops nest, the mean of a few terms: a loop inside a
            // loop runs count × count steps, and the counts that make loops
            // are smaller for heavier steps.
            let terms = if self.in_long > 1 {
                self.rng.range(3, 5)
            } else if nest {
                self.rng.range(2, 4)
            } else {
                1
            };
            let mut parts: Vec<Ex> = inner.into_iter().collect();
            // Sometimes a scan in the step (programs with the newer
            // constructs only: no draw otherwise).
            if self.scan_left > 0 && self.scan_ok() && self.rng.chance(0.6) {
                if let Some(e) = self.scan_expr(leaf, dd) {
                    self.scan_left -= 1;
                    parts.push(e);
                }
            }
            while parts.len() < terms {
                let e = self.gen(leaf, dd);
                parts.push(e);
            }
            let mut f = if parts.len() == 1 {
                parts.pop().unwrap()
            } else {
                let texts: Vec<&str> = parts.iter().map(|e| e.s.as_str()).collect();
                let b = parts.iter().map(|e| e.b).sum::<f64>() / parts.len() as f64;
                let var = parts.iter().any(|e| e.var);
                let refs: Vec<&Ex> = parts.iter().collect();
                Ex::of(
                    format!("(({}) / {})", texts.join(" + "), parts.len()),
                    b,
                    var,
                    &refs,
                )
            };
            let text = match forms[k] {
                0 => {
                    f = self.fit(f, bounds[k]);
                    format!("({q} + #H{id}# * ({} - {q}))", f.s)
                }
                1 => {
                    f = self.fit(f, bounds[k]);
                    format!("({q} - #H{id}# * ({q} - {}))", f.s)
                }
                _ => format!("({q} + #H{id}# * tanh({}))", f.s),
            };
            vars.push(inits[k].var && f.var);
            steps.push(text);
        }
        self.in_long -= 1;
        if runtime.is_some() {
            self.no_long -= 1;
        }
        let read = self.leave_step(saved, keep);
        let count = if runtime.is_some() {
            "n".to_string()
        } else {
            format!("#C{id}#")
        };
        let text = if comps == 1 {
            format!(
                "iterate({count}, {}, {} => {})",
                inits[0].s, names[0], steps[0]
            )
        } else {
            let inits: Vec<&str> = inits.iter().map(|e| e.s.as_str()).collect();
            format!(
                "iterate({count}, ({}), ({}) => ({}))",
                inits.join(", "),
                names.join(", "),
                steps.join(", ")
            )
        };
        tag("long iterate (a loop)", &text);
        tag(
            match (leaf, comps) {
                (Ty::S, 1) => "loop: scalar state",
                (Ty::S, _) => "loop: tuple of scalars",
                (_, 1) => "loop: vector state",
                _ => "loop: tuple of vectors",
            },
            &text,
        );
        if !read.is_empty() {
            tag("loop: reads values from outside", &text);
        }
        if leaf != Ty::S && read.contains(&Ty::S) {
            tag("loop: scalar read by a vector state", &text);
        }
        if self.in_long > 0 {
            tag("loop: inside a loop's step", &text);
        }
        if self.m_name == "K" {
            tag("loop: in a helper", &text);
        }
        if runtime.is_some() {
            tag("loop: run-time count", &text);
        }
        (text, bounds, vars)
    }

    fn scalar_special(&mut self, d: u32) -> Option<Ex> {
        let avail: Vec<Ty> = self.avail().into_iter().filter(|t| t.is_array()).collect();
        let in_tab = self.tab.clone();
        match self.rng.below(8) {
            // Reductions.
            0..=2 => {
                let rows: Vec<Ty> = self
                    .tab_rows()
                    .into_iter()
                    .filter(|t| t.is_array())
                    .collect();
                if !rows.is_empty() && self.rng.chance(0.6) {
                    // `+/` of a row of the enclosing tabulate.
                    let t = self.rng.pick(&rows);
                    let a = self.gen(t, d);
                    if self.rng.chance(0.3) {
                        // `max/` or `min/` of the row (or of a product of
                        // rows), with generically distinct elements.
                        let b = self.rng.chance(0.5).then(|| self.gen(t, d));
                        let (s, bound, var, tab) = match &b {
                            Some(b) => (
                                format!("({} .* {})", a.s, b.s),
                                a.b * b.b,
                                a.var || b.var,
                                a.tab || b.tab,
                            ),
                            None => (a.s.clone(), a.b, a.var, a.tab),
                        };
                        if var {
                            let f = if self.rng.chance(0.5) { "max/" } else { "min/" };
                            let text = format!("({f}{s})");
                            if tab {
                                tag("max/ or min/ of a row in tabulate", &text);
                            }
                            let parts: Vec<&Ex> = std::iter::once(&a).chain(b.as_ref()).collect();
                            return Some(Ex::of(text, bound, false, &parts).not_ts());
                        }
                    }
                    if self.rng.chance(0.5) {
                        let b = self.gen(t, d);
                        return Some(Ex::of(
                            format!("(+/({} .* {}))", a.s, b.s),
                            t.len_max() * a.b * b.b,
                            a.var || b.var,
                            &[&a, &b],
                        ));
                    }
                    return Some(Ex::of(
                        format!("(+/{})", a.s),
                        t.len_max() * a.b,
                        a.var,
                        &[&a],
                    ));
                }
                if avail.is_empty() {
                    return None;
                }
                self.hoist(|g| {
                    let t = g.rng.pick(&avail);
                    let a = g.gen(t, d);
                    let r = g.rng.below(4);
                    let e = if r < 2 && a.var {
                        let f = if r == 0 { "max/" } else { "min/" };
                        Ex::of(format!("({f}{})", a.s), a.b, false, &[&a]).not_ts()
                    } else if r == 2 {
                        let (a2, b) = g.distinct(t, t, d);
                        Ex::of(
                            format!("(+/({} .* {}))", a2.s, b.s),
                            t.len_max() * a2.b * b.b,
                            false,
                            &[&a2, &b],
                        )
                    } else {
                        Ex::of(format!("(+/{})", a.s), t.len_max() * a.b, false, &[&a])
                    };
                    Some(e)
                })
            }
            // A static index of a computed array.
            3 => {
                if avail.is_empty() {
                    return None;
                }
                self.hoist(|g| {
                    let t = g.rng.pick(&avail);
                    let a = g.gen(t, d);
                    let (Ty::V(dd) | Ty::Mt(dd, _)) = t else {
                        return None;
                    };
                    let k = g.rng.below(g.min_len(dd) as usize);
                    let ix = match t {
                        Ty::Mt(_, c) => format!("{k}, {}", g.rng.below(g.min_len(c) as usize)),
                        _ => k.to_string(),
                    };
                    Some(Ex::of(format!("({})[{ix}]", a.s), a.b, false, &[&a]).not_ts())
                })
            }
            // `+/tabulate[2](...)` (the loss has N >= 2).
            4 => {
                if in_tab.is_some() || self.n_min < 2 {
                    return None;
                }
                let e = self.tabulate_body(Len::Two, Ty::S, d)?;
                let r = self.rng.below(3);
                let f = if r == 0 && e.var {
                    "max/"
                } else if r == 1 && e.var {
                    "min/"
                } else {
                    "+/"
                };
                Some(
                    Ex::of(
                        format!("({f}tabulate[2]({}))", e.s),
                        2.0 * e.b,
                        false,
                        &[&e],
                    )
                    .not_ts(),
                )
            }
            // `+/tabulate[N-2](...)`: windows of three, empty when N = 2.
            5 => {
                if in_tab.is_some() || self.n_min < 2 {
                    return None;
                }
                let e = self.tabulate_body(Len::N2, Ty::S, d)?;
                let len = match self.lit {
                    Some((n, _)) => (n - 2).to_string(),
                    None => "N-2".into(),
                };
                Some(
                    Ex::of(
                        format!("(+/tabulate[{len}]({}))", e.s),
                        dim_max(D::N1) * e.b,
                        false,
                        &[&e],
                    )
                    .not_ts(),
                )
            }
            // The sum of a matrix-vector product or of row maxima.
            6 => {
                if in_tab.is_some() {
                    return None;
                }
                let mats: Vec<Ty> = avail
                    .iter()
                    .copied()
                    .filter(|t| matches!(t, Ty::Mt(..)))
                    .collect();
                if mats.is_empty() {
                    return None;
                }
                let m = self.rng.pick(&mats);
                let Ty::Mt(r, c) = m else { return None };
                let e = self.matvec(m, c, r, d)?;
                Some(Ex::of(format!("(+/{})", e.s), dim_max(r) * e.b, false, &[&e]).not_ts())
            }
            _ => Some(self.binary(Ty::S, d)),
        }
    }

    /// `i => body` of a `tabulate[len]` whose elements have type `elem`.
    /// Returns the text `i => body`.
    fn tabulate_body(&mut self, len: Len, elem: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let bases = self.tab_bases(len);
        if bases.is_empty() {
            return None;
        }
        let idx = self.fresh("i");
        self.tab = Some(Tab {
            len,
            idx: idx.clone(),
        });
        self.no_tabulate = true;
        let rows: Vec<Ty> = bases.iter().map(|r| r.4).collect();
        let mut body = if elem == Ty::S || rows.contains(&elem) {
            self.gen(elem, d)
        } else {
            self.tab = None;
            self.no_tabulate = false;
            return None;
        };
        if !body.tab {
            // Make it depend on the index.
            let s_rows = bases.iter().any(|r| r.4 == Ty::S);
            let leaf_ty = if s_rows { Ty::S } else { elem };
            if let Some(l) = self.tab_leaf(leaf_ty) {
                body = Ex::of(
                    format!("({} + {})", body.s, l.s),
                    body.b + l.b,
                    l.var,
                    &[&body, &l],
                );
                body = self.bounded(body);
            }
        }
        self.tab = None;
        self.no_tabulate = false;
        if !body.tab {
            return None;
        }
        let mut e = body.clone();
        e.s = format!("{idx} => {}", body.s);
        e.tab = false;
        e.ts = false;
        e.k = false;
        Some(e)
    }

    fn array_special(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return Some(self.binary(ty, d));
        }
        let avail = self.avail();
        match self.rng.below(5) {
            // tabulate
            0 | 1 => {
                let (len, elem) = match ty {
                    Ty::V(l) => (l, Ty::S),
                    Ty::Mt(l, c) => (l, Ty::V(c)),
                    Ty::S => return None,
                };
                let e = self.tabulate_body(Len::D(len), elem, d)?;
                Some(Ex::of(
                    format!("tabulate[{}]({})", self.dim(len), e.s),
                    e.b,
                    e.var,
                    &[&e],
                ))
                .map(|e| e.not_ts())
            }
            // matrix ops
            2 => match ty {
                Ty::Mt(r, c) => {
                    if self.rng.chance(0.4) && avail.contains(&Ty::Mt(c, r)) {
                        let a = self.gen(Ty::Mt(c, r), d);
                        return Some(
                            Ex::of(format!("transpose({})", a.s), a.b, a.var, &[&a]).not_ts(),
                        );
                    }
                    let ks: Vec<D> = ALL_DIMS
                        .iter()
                        .copied()
                        .filter(|k| {
                            avail.contains(&Ty::Mt(r, *k)) && avail.contains(&Ty::Mt(*k, c))
                        })
                        .collect();
                    if ks.is_empty() {
                        return None;
                    }
                    let k = self.rng.pick(&ks);
                    let a = self.gen(Ty::Mt(r, k), d);
                    let b = self.gen(Ty::Mt(k, c), d);
                    let state = |e: &Ex| self.tab_states.iter().any(|q| mentions(&e.s, q));
                    if state(&a) && state(&b) {
                        return None;
                    }
                    Some(
                        Ex::of(
                            format!("matmul({}, {})", a.s, b.s),
                            dim_max(k) * a.b * b.b,
                            false,
                            &[&a, &b],
                        )
                        .not_ts(),
                    )
                }
                Ty::V(dd) => {
                    // A matrix-vector product, or a row of a matrix.
                    let mats: Vec<Ty> = avail
                        .iter()
                        .copied()
                        .filter(|t| matches!(t, Ty::Mt(r, _) if *r == dd))
                        .collect();
                    if mats.is_empty() {
                        return None;
                    }
                    let m = self.rng.pick(&mats);
                    let Ty::Mt(_, c) = m else { return None };
                    self.matvec(m, c, dd, d)
                }
                Ty::S => None,
            },
            // iterate with a tuple state
            3 => {
                let a = self.gen(Ty::S, d);
                let v = self.gen(ty, d);
                if v.k {
                    return None;
                }
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                let n = self.rng.below(4);
                let mark = self.env.len();
                let mut pa = a.clone();
                pa.b = a.b.max(1.0);
                let mut qv = v.clone();
                qv.b = v.b.max(1.0);
                self.push_var(&p, &pa, Ty::S);
                self.push_var(&q, &qv, ty);
                self.no_long += 1;
                let sa = self.gen(Ty::S, d);
                let sv = self.gen(ty, d);
                self.no_long -= 1;
                self.env.truncate(mark);
                let sa = self.fit(sa, pa.b);
                let sv = self.fit(sv, qv.b);
                let (x, y) = (self.fresh("t"), self.fresh("t"));
                Some(
                    Ex::of(
                        format!(
                            "({{ let ({x}, {y}) = iterate({n}, ({}, {}), ({p}, {q}) => ({}, {})); {y} }})",
                            a.s, v.s, sa.s, sv.s
                        ),
                        qv.b,
                        v.var && sv.var,
                        &[&a, &v, &sa, &sv],
                    )
                    .not_ts(),
                )
            }
            _ => Some(self.binary(ty, d)),
        }
    }

    /// `tabulate[r](i => +/(P[i] .* v))` or `matmul` with a one-column matrix.
    fn matvec(&mut self, m: Ty, c: D, r: D, d: u32) -> Option<Ex> {
        if self.no_tabulate {
            return None;
        }
        let mm = self.gen(m, d);
        let v = self.gen(Ty::V(c), d);
        let (w, z, idx) = (self.fresh("w"), self.fresh("z"), self.fresh("i"));
        if (mm.var || v.var) && self.rng.chance(0.4) {
            // The largest (smallest) element of each row: `max/X[i]` with a
            // matrix of distinct elements, or of each row times `v`.
            let f = if self.rng.chance(0.5) { "max/" } else { "min/" };
            let (row, b) = if mm.var && self.rng.chance(0.5) {
                (format!("{f}{w}[{idx}]"), mm.b)
            } else {
                (format!("{f}({w}[{idx}] .* {z})"), mm.b * v.b)
            };
            tag("max/ or min/ of a row in tabulate", &row);
            let text = format!(
                "({{ let {w} = {}; let {z} = {}; tabulate[{}]({idx} => {row}) }})",
                mm.s,
                v.s,
                self.dim(r)
            );
            let e = Ex::of(text, b, false, &[&mm, &v]).not_ts();
            return Some(self.bounded(e));
        }
        let text = if self.rng.chance(0.5) {
            // As a product with a one-column matrix.
            format!(
                "({{ let {w} = {}; let {z} = {}; transpose(matmul({w}, transpose(tabulate[1]({idx} => {z}))))[0] }})",
                mm.s, v.s
            )
        } else {
            format!(
                "({{ let {w} = {}; let {z} = {}; tabulate[{}]({idx} => +/({w}[{idx}] .* {z})) }})",
                mm.s,
                v.s,
                self.dim(r)
            )
        };
        let e = Ex::of(text, dim_max(c) * mm.b * v.b, false, &[&mm, &v]).not_ts();
        Some(self.bounded(e))
    }
}

// ---------------------------------------------------------------- nested tabulates and indexed stacks

/// Whether `text` mentions the name `name` (not as a part of a longer name).
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(name).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + name.len()..].chars().next())
    })
}

/// `i`, or `i + o`: a read at an offset along the index `i`.
fn at_offset(idx: &str, off: u64) -> String {
    if off == 0 {
        idx.to_string()
    } else {
        format!("{idx} + {off}")
    }
}

/// The tags of the nested `tabulate`s (counted by program; in a release
/// run at least 5% of the programs must have the first).
const NEST_TAGS: [&str; 7] = [
    "nested tabulate",
    "nested tabulate: three levels",
    "nested tabulate: reads along an outer index in the inner body",
    "nested tabulate: an element along two indices A[i, j]",
    "nested tabulate: the index of an enclosing tabulate as a number",
    "nested tabulate: a let of the outer body read by the inner one",
    "nested tabulate: if on a comparison of indices",
];

/// The tags of the indexed stacks (values that depend on the index of
/// `tabulate`, indexed): counted by program, and in a release run at least
/// 5% of the programs must have one of them.
const STACK_TAGS: [&str; 4] = [
    "indexed stack: a static index (X[i] .* w)[c]",
    "indexed stack: the index of tabulate (e)[i]",
    "indexed stack: a run-time index (e)[k]",
    "indexed stack: an index array (e)[ix[i]]",
];

/// What a nested `tabulate` written outside any `tabulate` gives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NestShape {
    /// `+/flatten(tabulate[..](i => tabulate[..](j => ...)))` (a scalar).
    Flat,
    /// `tabulate[..](i => +/tabulate[..](j => ...))`, a vector (summed
    /// for a scalar).
    RowSums,
    /// `tabulate[..](i => tabulate[..](j => ...))`, a matrix.
    Matrix,
}

impl Gen<'_> {
    /// The lengths a nested `tabulate` may have here.
    fn nest_lens(&self) -> Vec<Len> {
        let mut out = vec![Len::D(D::N)];
        if self.has_dim(D::M) {
            out.push(Len::D(D::M));
        }
        if self.allow_n1 {
            out.push(Len::D(D::N1));
        }
        if self.n_min >= 2 {
            out.push(Len::Two);
        }
        out
    }

    /// The loss has values along `d` (so its size is in scope).
    fn has_dim(&self, d: D) -> bool {
        self.lit.is_some()
            || self.env.iter().any(|v| match v.ty {
                Ty::S => false,
                Ty::V(a) => a == d,
                Ty::Mt(a, b) => a == d || b == d,
            })
    }

    /// An upper bound of a `tabulate` length.
    fn len_bound(&self, len: Len) -> f64 {
        match len {
            Len::D(d) => dim_max(d),
            Len::Two => 2.0,
            Len::N2 => (N_MAX - 2) as f64,
            Len::Lit(k) => k as f64,
            Len::M1 => (M_MAX - 1) as f64,
        }
    }

    /// A leaf of type `ty` in the body of a nested `tabulate`: an array
    /// read along the index of any level (`x[i]`, `y[j]`, `A[i]`, at
    /// offsets), an element along two of them (`A[i, j]`, `A[j, i]`,
    /// `A[i][j]`), or an index as a number (`f64(i) * 0.25`).
    fn nested_leaf(&mut self, ty: Ty) -> Option<Ex> {
        let mut levels = self.outer.clone();
        levels.push(self.tab.clone()?);
        let last = levels.len() - 1;
        // (text, name read, var, bound, tag)
        let mut cands: Vec<(String, String, bool, f64, Option<&'static str>)> = Vec::new();
        for (li, t) in levels.iter().enumerate() {
            for (base, var, b, off, row) in self.tab_bases(t.len) {
                let name = base
                    .trim_start_matches("transpose(")
                    .trim_start_matches("reverse(")
                    .trim_end_matches(')')
                    .to_string();
                let ix = at_offset(&t.idx, off);
                if row == ty {
                    cands.push((
                        format!("{base}[{ix}]"),
                        name.clone(),
                        var && (li == last || ty != Ty::S),
                        b,
                        (li != last).then_some(NEST_TAGS[2]),
                    ));
                }
                let Ty::V(c) = row else { continue };
                if ty != Ty::S {
                    continue;
                }
                for (lj, t2) in levels.iter().enumerate() {
                    if lj == li {
                        continue;
                    }
                    for o2 in self.offsets(t2.len, c) {
                        let ix2 = at_offset(&t2.idx, o2);
                        let text = if self.rng.chance(0.3) {
                            format!("{base}[{ix}][{ix2}]")
                        } else {
                            format!("{base}[{ix}, {ix2}]")
                        };
                        cands.push((text, name.clone(), false, b, Some(NEST_TAGS[3])));
                    }
                }
            }
        }
        if ty == Ty::S {
            for t in &levels {
                let b = 0.25 * (self.len_bound(t.len) - 1.0).max(0.0);
                cands.push((
                    format!("(f64({}) * 0.25)", t.idx),
                    String::new(),
                    false,
                    b,
                    Some(NEST_TAGS[4]),
                ));
            }
        }
        if cands.is_empty() {
            return None;
        }
        let (text, name, var, b, what) = self.rng.pick(&cands);
        if !name.is_empty() {
            self.mark_used(&name);
        }
        if let Some(what) = what {
            tag(what, &text);
        }
        let mut e = Ex::leaf(text, b, var);
        e.tab = true;
        Some(e)
    }

    /// One of the nested-`tabulate` constructs giving `ty`: a nested
    /// `tabulate`, one inside the current `tabulate`, an indexed stack, or
    /// a `tabulate` of one (None where none fits here).
    fn nest_construct(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let mut kinds = Vec::new();
        if self.nest {
            if self.tab.is_none() && !self.no_tabulate {
                kinds.push(0);
            }
            if self.tab.is_some() && self.outer.len() < 2 && !matches!(ty, Ty::Mt(..)) {
                kinds.push(1);
            }
        }
        if self.stack_ix {
            if self.tab.is_some() && ty == Ty::S {
                kinds.extend([2, 2]);
            }
            if self.tab.is_none() && !self.no_tabulate && !matches!(ty, Ty::Mt(..)) {
                kinds.push(3);
            }
        }
        if kinds.is_empty() {
            return None;
        }
        match self.rng.pick(&kinds) {
            0 => self.nested_tab(ty, d),
            1 => self.inner_tab(ty, d),
            2 => self.stack_index(d),
            _ => self.stack_tab(ty, d),
        }
    }

    /// A nested `tabulate` written outside any `tabulate`, giving `ty`:
    /// two levels, sometimes three; the outer body sometimes has lets the
    /// inner one reads.
    fn nested_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let lens = self.nest_lens();
        let (olen, ilen, shape) = match ty {
            Ty::S => {
                let shape = if self.rng.chance(0.5) {
                    NestShape::Flat
                } else {
                    NestShape::RowSums
                };
                (self.rng.pick(&lens), self.rng.pick(&lens), shape)
            }
            Ty::V(l) => (Len::D(l), self.rng.pick(&lens), NestShape::RowSums),
            Ty::Mt(a, b) => (Len::D(a), Len::D(b), NestShape::Matrix),
        };
        // A third level: summed in the inner body, or (a scalar) the
        // element of a rank-3 result.
        let third = match (shape, self.rng.chance(0.25)) {
            (_, false) => 0,
            (NestShape::Flat, true) if self.rng.chance(0.5) => 2,
            _ => 1,
        };
        let i = self.fresh("i");
        self.tab = Some(Tab {
            len: olen,
            idx: i.clone(),
        });
        self.no_tabulate = true;
        let mark = self.env.len();
        // Lets of the outer body (scalars or rows, of `i` mostly).
        let mut lets = String::new();
        let mut names = Vec::new();
        for _ in 0..self.rng.below(3) {
            let mut tys = vec![Ty::S];
            tys.extend(self.tab_rows().into_iter().filter(|t| t.is_array()));
            let t = self.rng.pick(&tys);
            let mut e = self.gen(t, d);
            if !e.tab {
                // Mostly a value of `i`.
                if let Some(l) = self.tab_leaf(t).filter(|_| self.rng.chance(0.8)) {
                    let op = self.rng.pick(&["+", "*", "-"]);
                    let b = if op == "*" { e.b * l.b } else { e.b + l.b };
                    e = Ex::of(format!("({} {op} {})", e.s, l.s), b, false, &[&e, &l]);
                    e = self.bounded(e);
                }
            }
            let u = self.fresh("u");
            let _ = write!(lets, "let {u} = {}; ", e.s);
            self.push_var(&u, &e, t);
            names.push((u, t, e.b, e.tab));
        }
        let inner = self.inner_tab_text(ilen, third, &names, d);
        self.env.truncate(mark);
        self.tab = None;
        self.no_tabulate = false;
        let inner = inner?;
        let reduce = shape == NestShape::RowSums;
        let core = if reduce {
            format!("(+/{})", inner.s)
        } else {
            inner.s.clone()
        };
        let body = if lets.is_empty() {
            core
        } else {
            format!("{{ {lets}{core} }}")
        };
        let tab = format!("tabulate[{}]({i} => {body})", self.len_text(olen));
        tag(NEST_TAGS[0], &tab);
        if third > 0 {
            tag(NEST_TAGS[1], &tab);
        }
        let (ilen_b, olen_b) = (self.len_bound(ilen), self.len_bound(olen));
        let (text, b) = match (ty, shape) {
            (Ty::S, NestShape::Flat) => {
                let rows = if third == 2 { N_MAX as f64 } else { 1.0 };
                (
                    format!("(+/flatten({tab}))"),
                    olen_b * ilen_b * rows * inner.b,
                )
            }
            (Ty::S, _) => (format!("(+/{tab})"), olen_b * ilen_b * inner.b),
            (_, NestShape::RowSums) => (tab, ilen_b * inner.b),
            _ => (tab, inner.b),
        };
        Some(Ex::leaf(text, b, false).not_ts())
    }

    /// `tabulate[len](j => e)` in the body of the current `tabulate`, `e` a
    /// scalar reading along every index (its bound is `e`'s). `lets` are
    /// the lets of the enclosing body (name, type, bound, depends on its
    /// index), some of which `e` reads. With `third` 1, `e` sums a
    /// `tabulate` of its own; with 2, `e` is one (a rank-3 result).
    fn inner_tab_text(
        &mut self,
        len: Len,
        third: u8,
        lets: &[(String, Ty, f64, bool)],
        d: u32,
    ) -> Option<Ex> {
        let cur = self.tab.clone()?;
        let j = self.fresh("j");
        self.outer.push(cur);
        self.tab = Some(Tab {
            len,
            idx: j.clone(),
        });
        let body = match third {
            0 => Some(self.inner_body(&j, lets, d)),
            _ => {
                let l3 = self.rng.pick(&self.nest_lens());
                self.inner_tab_text(l3, 0, &[], d).map(|e| {
                    if third == 2 {
                        e
                    } else {
                        let s = Ex::of(
                            format!("(+/{})", e.s),
                            self.len_bound(l3) * e.b,
                            false,
                            &[&e],
                        );
                        self.bounded(s)
                    }
                })
            }
        };
        self.tab = self.outer.pop();
        let body = body?;
        let mut e = body.clone();
        e.s = format!("tabulate[{}]({j} => {})", self.len_text(len), body.s);
        e.tab = true;
        e.var = false;
        e.ts = false;
        e.k = false;
        tag(NEST_TAGS[0], &e.s);
        if third > 0 {
            tag(NEST_TAGS[1], &e.s);
        }
        Some(e)
    }

    /// The scalar body of an inner `tabulate` whose index is `j`: a
    /// generated scalar made to read along `j`, sometimes with a let of
    /// the enclosing body (`u`, or `u[j]` of a row) and under an `if` on a
    /// comparison of indices.
    fn inner_body(&mut self, j: &str, lets: &[(String, Ty, f64, bool)], d: u32) -> Ex {
        let mut body = self.gen(Ty::S, d);
        if !mentions(&body.s, j) {
            let mut leaf = None;
            for _ in 0..6 {
                match self.nested_leaf(Ty::S) {
                    Some(l) if mentions(&l.s, j) => {
                        leaf = Some(l);
                        break;
                    }
                    _ => {}
                }
            }
            let l = leaf.unwrap_or_else(|| {
                let b = 0.25 * (self.len_bound(self.tab.as_ref().unwrap().len) - 1.0).max(0.0);
                let mut e = Ex::leaf(format!("(f64({j}) * 0.25)"), b, false);
                e.tab = true;
                e
            });
            let op = self.rng.pick(&["+", "*", "-"]);
            let b = if op == "*" {
                body.b * l.b
            } else {
                body.b + l.b
            };
            body = Ex::of(format!("({} {op} {})", body.s, l.s), b, false, &[&body, &l]);
            body = self.bounded(body);
        }
        // A let of the outer body: a scalar, or a row read along `j`.
        if !lets.is_empty() && self.rng.chance(0.6) {
            let (u, t, b, _) = self.rng.pick(lets);
            let len = self.tab.as_ref().unwrap().len;
            let read = match t {
                Ty::S => Some((u.clone(), b)),
                Ty::V(c) => {
                    let offs = self.offsets(len, c);
                    (!offs.is_empty()).then(|| {
                        let o = self.rng.pick(&offs);
                        (format!("{u}[{}]", at_offset(j, o)), b)
                    })
                }
                Ty::Mt(..) => None,
            };
            if let Some((text, b)) = read {
                self.mark_used(&u);
                let op = self.rng.pick(&["+", "*", "-"]);
                let bound = if op == "*" { body.b * b } else { body.b + b };
                let s = format!("({} {op} {text})", body.s);
                tag(NEST_TAGS[5], &s);
                let mut e = Ex::leaf(s, bound, false);
                e.tab = true;
                e.ts = false;
                body = self.bounded(e);
            }
        }
        // An `if` on a comparison of the indices.
        if self.rng.chance(0.25) {
            let levels: Vec<String> = self.outer.iter().map(|t| t.idx.clone()).collect();
            let i = self.rng.pick(&levels);
            let c = match self.rng.below(5) {
                0 => format!("{j} <= {i}"),
                1 => format!("{i} < {j}"),
                2 => format!("{i} != {j}"),
                3 => format!("{j} % 2 == 0"),
                _ => format!("{i} + {j} >= 2"),
            };
            let other = self.gen(Ty::S, d.min(1));
            let s = if self.rng.chance(0.5) {
                format!("(if {c} {{ {} }} else {{ {} }})", body.s, other.s)
            } else {
                format!("(if {c} {{ {} }} else {{ {} }})", other.s, body.s)
            };
            tag(NEST_TAGS[6], &s);
            let mut e = Ex::of(s, body.b.max(other.b), false, &[&body, &other]);
            e.tab = true;
            e.k = false;
            body = e;
        }
        body
    }

    /// A nested `tabulate` in the body of the current `tabulate` (at most
    /// three levels in all): `(+/tabulate[L](j => e))` for a scalar, or
    /// `tabulate[c](j => e)` for a row `f64[c]`.
    fn inner_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let len = match ty {
            Ty::S => self.rng.pick(&self.nest_lens()),
            Ty::V(c) => Len::D(c),
            Ty::Mt(..) => return None,
        };
        let e = self.inner_tab_text(len, 0, &[], d)?;
        if ty == Ty::S {
            let mut s = Ex::of(
                format!("(+/{})", e.s),
                self.len_bound(len) * e.b,
                false,
                &[&e],
            );
            s.tab = true;
            Some(s.not_ts())
        } else {
            Some(e)
        }
    }

    /// A scalar in the body of a `tabulate`: a row that depends on its
    /// index (a stack), indexed with a static index, the index of a
    /// `tabulate` (where the row is at least as long), a run-time index
    /// (with run-time integers) or an element of an index array at the
    /// index of a `tabulate` (`ix[i]`).
    fn stack_index(&mut self, d: u32) -> Option<Ex> {
        let tab = self.tab.clone()?;
        let mut levels = self.outer.clone();
        levels.push(tab);
        // Rows read along an index, or vectors from outside (times a
        // scalar that depends on the index); mostly a length an index
        // array indexes, where there is one.
        let mut rows: Vec<D> = self
            .tab_rows()
            .into_iter()
            .chain(self.avail())
            .filter_map(|t| match t {
                Ty::V(c) => Some(c),
                _ => None,
            })
            .collect();
        if rows.is_empty() {
            return None;
        }
        // (Not in a loop's step, which reads only what a loop carries.)
        let ints = self.int_ok();
        let indexed: Vec<D> = rows
            .iter()
            .copied()
            .filter(|&c| ints && !self.index_arrays(None, Some(c)).is_empty())
            .collect();
        if !indexed.is_empty() && self.rng.chance(0.7) {
            rows = indexed;
        }
        let c = self.rng.pick(&rows);
        let mut e = self.gen(Ty::V(c), d);
        if !e.tab {
            let l = match self.tab_leaf(Ty::V(c)) {
                Some(l) if self.rng.chance(0.6) => Some(l),
                _ => self.tab_leaf(Ty::S),
            };
            if let Some(l) = l {
                let op = if l.s.contains('[') && self.rng.chance(0.5) {
                    "*"
                } else {
                    self.rng.pick(&["+", "*", "-"])
                };
                let b = if op == "*" { e.b * l.b } else { e.b + l.b };
                e = Ex::of(format!("({} {op} {})", e.s, l.s), b, false, &[&e, &l]);
                e = self.bounded(e);
            }
        }
        let fits: Vec<String> = levels
            .iter()
            .filter(|t| self.offsets(t.len, c).contains(&0))
            .map(|t| t.idx.clone())
            .collect();
        let arrays: Vec<(String, String)> = self
            .index_arrays(None, Some(c))
            .iter()
            .filter(|_| ints)
            .flat_map(|p| {
                levels
                    .iter()
                    .filter(|t| self.offsets(t.len, p.len.unwrap()).contains(&0))
                    .map(|t| (p.name.to_string(), t.idx.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut kinds = vec![0];
        if !fits.is_empty() {
            kinds.extend([1, 1]);
        }
        if self.int_ok() {
            kinds.extend([2, 2]);
        }
        if !arrays.is_empty() {
            kinds.extend([3, 3, 3, 3]);
        }
        let (ix, what) = match self.rng.pick(&kinds) {
            0 => (
                self.rng.below(self.known_len(c) as usize).to_string(),
                STACK_TAGS[0],
            ),
            1 => (self.rng.pick(&fits), STACK_TAGS[1]),
            2 => (self.index(c, d), STACK_TAGS[2]),
            _ => {
                let (p, i) = self.rng.pick(&arrays);
                (format!("{p}[{i}]"), STACK_TAGS[3])
            }
        };
        let text = format!("({})[{ix}]", e.s);
        if e.tab {
            tag(what, &text);
        }
        let mut r = Ex::leaf(text, e.b, false).not_ts();
        r.tab = true;
        Some(r)
    }

    /// A `tabulate` (outside any) whose body indexes a stack: a vector,
    /// or its sum for a scalar.
    fn stack_tab(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        let len = match ty {
            Ty::V(l) => Len::D(l),
            Ty::S => self.rng.pick(&self.nest_lens()),
            Ty::Mt(..) => return None,
        };
        let i = self.fresh("i");
        self.tab = Some(Tab {
            len,
            idx: i.clone(),
        });
        self.no_tabulate = true;
        let body = self.stack_index(d).map(|e| {
            if self.rng.chance(0.5) {
                let o = self.gen(Ty::S, d);
                let op = self.rng.pick(&["+", "*", "-"]);
                let b = if op == "*" { e.b * o.b } else { e.b + o.b };
                let mut r = Ex::of(format!("({} {op} {})", e.s, o.s), b, false, &[&e, &o]);
                r.tab = true;
                self.bounded(r)
            } else {
                e
            }
        });
        self.tab = None;
        self.no_tabulate = false;
        let body = body?;
        let tab = format!("tabulate[{}]({i} => {})", self.len_text(len), body.s);
        Some(
            match ty {
                Ty::S => Ex::leaf(format!("(+/{tab})"), self.len_bound(len) * body.b, false),
                _ => Ex::leaf(tab, body.b, false),
            }
            .not_ts(),
        )
    }
}

// ---------------------------------------------------------------- loops

// ---------------------------------------------------------------- run-time integers

/// A run-time `i64` parameter of the loss (`EGRAD_RANDOM_INTS`): a scalar
/// index or an index array, whose values the check draws in range (see
/// `int_range`).
#[derive(Clone, Copy, Debug)]
struct IntParam {
    name: &'static str,
    /// Its length (an index array), or None (a scalar).
    len: Option<D>,
    /// The dimension its values index (each is in `0 .. that length`).
    range: D,
}

/// The run-time integer parameters a loss may have: `k` and `j` index
/// along `N` and `M`, `ix: i64[N]` and `iy: i64[M]` along `N`, `jx:
/// i64[N]` along `M`.
const INT_PARAMS: [IntParam; 5] = [
    IntParam {
        name: "k",
        len: None,
        range: D::N,
    },
    IntParam {
        name: "j",
        len: None,
        range: D::M,
    },
    IntParam {
        name: "ix",
        len: Some(D::N),
        range: D::N,
    },
    IntParam {
        name: "iy",
        len: Some(D::M),
        range: D::N,
    },
    IntParam {
        name: "jx",
        len: Some(D::N),
        range: D::M,
    },
];

/// The dimension an `i64` parameter of this name indexes (its values are
/// drawn in `0 .. that length`), or None (a run-time count `n`).
fn int_range(name: &str) -> Option<D> {
    INT_PARAMS.iter().find(|p| p.name == name).map(|p| p.range)
}

/// A generated `i64` scalar expression.
#[derive(Clone, Debug)]
struct IEx {
    /// Source text, always an operand.
    s: String,
    /// An upper bound of its magnitude, whatever the float inputs (a float
    /// becomes an integer only as `i64(tanh(e) * c)`), so integers never
    /// come near 2^53 (see `int_float`).
    b: f64,
    /// Known at compile time (literals only).
    k: bool,
}

/// The largest magnitude of a generated integer before it is wrapped with
/// `% 7`.
const INT_LIMIT: f64 = 500.0;

impl Gen<'_> {
    /// Run-time integers may be written here: the loss has some, and this
    /// is not a loop's (or a scan's) step, which reads from outside only
    /// what a loop carries along its state.
    fn int_ok(&self) -> bool {
        !self.ints.is_empty() && self.in_long == 0
    }

    /// The index arrays of length `len` (any, if None) whose values index
    /// along `range` (any, if None).
    fn index_arrays(&self, len: Option<D>, range: Option<D>) -> Vec<IntParam> {
        self.ints
            .iter()
            .filter(|p| {
                p.len.is_some()
                    && len.is_none_or(|l| p.len == Some(l))
                    && range.is_none_or(|r| p.range == r)
            })
            .copied()
            .collect()
    }

    /// An integer literal from 0 to 5.
    fn int_lit(&mut self) -> IEx {
        let v = self.rng.below(6);
        IEx {
            s: v.to_string(),
            b: v as f64,
            k: true,
        }
    }

    /// A leaf of an integer expression that is known only at run time: a
    /// scalar parameter, an element of an index array, an integer from a
    /// bounded float, or a call of the helper with an `i64` result.
    fn int_leaf(&mut self, d: u32) -> IEx {
        loop {
            match self.rng.below(5) {
                0 | 1 => {
                    let scalars: Vec<IntParam> = self
                        .ints
                        .iter()
                        .filter(|p| p.len.is_none())
                        .copied()
                        .collect();
                    if scalars.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&scalars);
                    let b = dim_max(p.range) - 1.0;
                    return IEx {
                        s: p.name.into(),
                        b,
                        k: false,
                    };
                }
                2 => {
                    let arrays = self.index_arrays(None, None);
                    if arrays.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&arrays);
                    let c = self.rng.below(self.known_len(p.len.unwrap()) as usize);
                    return IEx {
                        s: format!("{}[{c}]", p.name),
                        b: dim_max(p.range) - 1.0,
                        k: false,
                    };
                }
                3 => return self.float_to_int(d),
                _ => {
                    let Some((h, hb)) = self.int_helper.clone() else {
                        continue;
                    };
                    if !self.avail().contains(&Ty::V(D::N)) {
                        continue;
                    }
                    let v = self.hoist(|g| g.gen(Ty::V(D::N), d.min(1)));
                    // A scalar `i64` parameter is a count: the helper takes a
                    // parameter or a literal, not a computed integer.
                    let k = match self
                        .ints
                        .iter()
                        .find(|p| p.len.is_none() && p.range == D::N)
                    {
                        Some(p) if self.rng.chance(0.8) => p.name.to_string(),
                        _ => self.rng.below(self.known_len(D::N) as usize).to_string(),
                    };
                    let s = format!("{h}({}, {k})", v.s);
                    tag("helper with an i64 result", &s);
                    return IEx { s, b: hb, k: false };
                }
            }
        }
    }

    /// `i64(tanh(e) * c)`: an integer from a float, bounded even for
    /// infinite or NaN `e` (NaN converts to 0).
    fn float_to_int(&mut self, d: u32) -> IEx {
        let e = self.hoist(|g| g.gen(Ty::S, d.min(1)));
        let c = self.rng.pick(&[2.0, 3.0, 4.0, 2.5]);
        let s = format!("i64(tanh({}) * {})", e.s, fmt_lit(c));
        tag("i64(...) of a float", &s);
        // Of a float known at compile time, the integer is too (and may
        // be 0: `i64(tanh(0.5) * 2)`).
        IEx { s, b: c, k: e.k }
    }

    /// A scalar `i64` expression: integer arithmetic, `max`, `min`, `abs`
    /// and `if` on integer conditions, never far from 0.
    fn iexpr(&mut self, d: u32) -> IEx {
        if d == 0 || self.rng.chance(0.25) {
            return if self.rng.chance(0.2) {
                self.int_lit()
            } else {
                self.int_leaf(d)
            };
        }
        let d = d - 1;
        let mut e = match self.rng.below(10) {
            0..=5 => {
                let a = self.iexpr(d);
                let mut b = self.iexpr(d);
                if a.k && b.k {
                    // (Static integers fold at compile time, `/` truncating.)
                    b = self.int_leaf(d);
                }
                let mut op = self.rng.pick(&["+", "-", "*", "/", "%", "+", "*"]);
                if matches!(op, "/" | "%") && b.k {
                    // A divisor known at compile time may be 0, a compile
                    // error (found by the soak, seed 0x903b8640d02b3e15):
                    // keep it away from 0, or add two static integers.
                    if a.k {
                        op = "+";
                    } else {
                        b = IEx {
                            s: format!("(1 + abs({}))", b.s),
                            b: 1.0 + b.b,
                            k: true,
                        };
                    }
                }
                let bound = match op {
                    "+" | "-" => a.b + b.b,
                    "*" => a.b * b.b,
                    "/" => a.b,
                    _ => b.b,
                };
                let s = format!("({} {op} {})", a.s, b.s);
                tag("integer arithmetic", &s);
                IEx {
                    s,
                    b: bound,
                    k: false,
                }
            }
            6 | 7 => {
                let a = self.iexpr(d);
                if self.rng.chance(0.3) {
                    let s = format!("abs({})", a.s);
                    tag("integer max, min or abs", &s);
                    IEx { s, b: a.b, k: a.k }
                } else {
                    let mut b = self.iexpr(d);
                    if a.k && b.k {
                        b = self.int_leaf(d);
                    }
                    let f = if self.rng.chance(0.5) { "max" } else { "min" };
                    let s = format!("{f}({}, {})", a.s, b.s);
                    tag("integer max, min or abs", &s);
                    IEx {
                        s,
                        b: a.b.max(b.b),
                        k: false,
                    }
                }
            }
            _ => {
                let c = self.icond(d);
                let a = self.iexpr(d);
                let b = self.iexpr(d);
                let s = format!(
                    "(if {c} {{ {} }} else {{ {} }})",
                    self.int_value(&a),
                    self.int_value(&b)
                );
                tag("if on an integer condition", &s);
                IEx {
                    s,
                    b: a.b.max(b.b),
                    k: false,
                }
            }
        };
        if e.b > INT_LIMIT {
            e = IEx {
                s: format!("({} % 7)", e.s),
                b: 6.0,
                k: e.k,
            };
        }
        e
    }

    /// The text of `e` where a value is wanted: a scalar `i64` parameter is
    /// a count to egrad, not a value a function or an `if` may give
    /// (`fn f(k: i64) -> i64 = k` and `if c { k } else { k + 1 }` are
    /// errors: see the module doc), so it is written `(k + 0)` there.
    fn int_value(&self, e: &IEx) -> String {
        if self.ints.iter().any(|p| p.len.is_none() && p.name == e.s) {
            format!("({} + 0)", e.s)
        } else {
            e.s.clone()
        }
    }

    /// A comparison of run-time integers.
    fn icond(&mut self, d: u32) -> String {
        let a = self.iexpr(d.min(1));
        let mut b = self.iexpr(d.min(1));
        if a.k && b.k {
            b = self.int_leaf(0);
        }
        let op = self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
        let s = format!("({} {op} {})", a.s, b.s);
        tag("integer comparison", &s);
        s
    }

    /// A scalar index of an array whose leading dimension is `range`: in
    /// range whatever the inputs (a parameter drawn in range, `% len` or a
    /// clamp to `0 .. len` with the length known for sure here).
    fn index(&mut self, range: D, d: u32) -> String {
        let len = self.known_len(range);
        loop {
            match self.rng.below(6) {
                0 | 1 => {
                    let ps: Vec<IntParam> = self
                        .ints
                        .iter()
                        .filter(|p| p.len.is_none() && p.range == range)
                        .copied()
                        .collect();
                    if ps.is_empty() {
                        continue;
                    }
                    return self.rng.pick(&ps).name.to_string();
                }
                2 => {
                    let arrays = self.index_arrays(None, Some(range));
                    if arrays.is_empty() {
                        continue;
                    }
                    let p = self.rng.pick(&arrays);
                    let c = self.rng.below(self.known_len(p.len.unwrap()) as usize);
                    return format!("{}[{c}]", p.name);
                }
                3 => {
                    let e = self.iexpr(d);
                    if e.k {
                        continue;
                    }
                    let s = format!("({} % {len})", e.s);
                    tag("index: an integer % the length", &s);
                    return s;
                }
                4 => {
                    let e = if self.rng.chance(0.5) {
                        self.float_to_int(d)
                    } else {
                        self.iexpr(d)
                    };
                    if e.k {
                        continue;
                    }
                    let s = format!("min(max({}, 0), {})", e.s, len - 1);
                    tag("index: an integer clamped to the length", &s);
                    return s;
                }
                _ => {
                    let e = self.float_to_int(d);
                    let s = format!("({} % {len})", e.s);
                    tag("index: i64(...) of a float % the length", &s);
                    return s;
                }
            }
        }
    }

    /// An index array of length `len` whose values index along `range`:
    /// a parameter, or integer arithmetic on one brought back in range.
    fn index_array(&mut self, len: D, range: D, d: u32) -> Option<String> {
        let arrays = self.index_arrays(Some(len), Some(range));
        let any = self.index_arrays(Some(len), None);
        if any.is_empty() {
            return None;
        }
        if !arrays.is_empty() && self.rng.chance(0.6) {
            return Some(self.rng.pick(&arrays).name.to_string());
        }
        // Arithmetic on an index array of this length (whatever it indexes).
        let p = self.rng.pick(&any);
        let e = self.iexpr(d.min(1));
        let n = self.known_len(range);
        let s = match self.rng.below(4) {
            0 => format!("(({} + {}) % {n})", p.name, e.s),
            1 => format!("((2 * {} - {}) % {n})", p.name, e.s),
            2 => format!("(abs({} - {}) % {n})", p.name, e.s),
            _ => format!("min(max({} * {}, 0), {})", p.name, e.s, n - 1),
        };
        tag("integer arithmetic", &s);
        tag("index array: integer arithmetic on indices", &s);
        Some(s)
    }

    /// A float expression of type `ty` made with run-time integers: a
    /// gather, a run-time index, `tabulate` over an index array,
    /// `scatter_add`, `f64(...)` of integers or an `if` on an integer
    /// condition (None where none fits).
    ///
    /// Integer comparisons are never made of values that depend on the
    /// index of `tabulate` (`ix[i] > 1`): egrad mistypes their masks (see
    /// the module doc).
    fn int_float(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let kind = self.rng.below(10);
        self.int_float_of(ty, d, kind)
    }

    /// `int_float` of kind `kind` (0 to 9: 0 to 3 a run-time index, 4 and
    /// 5 `f64(...)`, 6 `if`, 7 `scatter_add`, 8 `tabulate` over an index
    /// array, 9 a gather or a row at a run-time index).
    fn int_float_of(&mut self, ty: Ty, d: u32, kind: usize) -> Option<Ex> {
        if self.tab.is_some() {
            return self.hoist(|g| g.int_float_of(ty, d, kind));
        }
        let avail = self.avail();
        match (ty, kind) {
            // A run-time index `v[k]`, or an element `A[a, b]` with a
            // run-time index in either position or both.
            (Ty::S, 0..=3) => {
                let mut vecs: Vec<Ty> = avail
                    .iter()
                    .copied()
                    .filter(|t| matches!(t, Ty::V(_) | Ty::Mt(..)))
                    .collect();
                vecs.retain(|t| !t.uses_n1());
                if vecs.is_empty() {
                    return None;
                }
                let t = self.rng.pick(&vecs);
                let v = self.gen(t, d);
                let s = match t {
                    Ty::V(r) => {
                        let s = format!("{}[{}]", v.s, self.index(r, d));
                        tag("run-time index x[k]", &s);
                        s
                    }
                    Ty::Mt(r, c) => {
                        let (a, b) = match self.rng.below(3) {
                            0 => (self.index(r, d), self.index(c, d)),
                            1 => (
                                self.index(r, d),
                                self.rng.below(self.known_len(c) as usize).to_string(),
                            ),
                            _ => (
                                self.rng.below(self.known_len(r) as usize).to_string(),
                                self.index(c, d),
                            ),
                        };
                        let s = format!("{}[{a}, {b}]", v.s);
                        tag("run-time index of a matrix element A[a, b]", &s);
                        s
                    }
                    Ty::S => unreachable!(),
                };
                Some(Ex::leaf(s, v.b, false).not_ts())
            }
            // A float from integers.
            (_, 4 | 5) => {
                let (s, b) = match ty {
                    Ty::S => {
                        let e = self.iexpr(d);
                        (format!("f64({})", e.s), e.b)
                    }
                    Ty::V(l) => {
                        let ia = self.index_array(l, D::N, d)?;
                        (format!("f64({ia})"), dim_max(D::N))
                    }
                    Ty::Mt(..) => return None,
                };
                tag("f64(...) of integers", &s);
                let e = Ex::leaf(s, b, false).not_ts();
                let x = self.gen(ty, d);
                let op = self.rng.pick(&["+", "*", "-"]);
                let bound = if op == "*" { b * x.b } else { b + x.b };
                Some(Ex::of(format!("({} {op} {})", e.s, x.s), bound, false, &[&e, &x]).not_ts())
            }
            // `if` on an integer condition (element-wise on an index array
            // of the branches' length).
            (_, 6) => {
                let c = match ty {
                    Ty::V(l) if self.rng.chance(0.5) => {
                        let ia = self.index_array(l, D::N, d)?;
                        let e = self.iexpr(d.min(1));
                        let op = self.rng.pick(&["<", ">", "==", "!=", ">="]);
                        let s = format!("({ia} {op} {})", e.s);
                        tag("integer comparison", &s);
                        s
                    }
                    _ => self.icond(d),
                };
                let a = self.gen(ty, d);
                let b = self.gen(ty, d);
                let s = format!("(if {c} {{ {} }} else {{ {} }})", a.s, b.s);
                tag("if on an integer condition", &s);
                Some(Ex::of(s, a.b.max(b.b), false, &[&a, &b]).not_ts())
            }
            // `scatter_add(x, idx, rows)`.
            (Ty::V(r) | Ty::Mt(r, _), 7) => {
                if r == D::N1 {
                    return None;
                }
                let lens: Vec<D> = self
                    .index_arrays(None, None)
                    .iter()
                    .map(|p| p.len.unwrap())
                    .collect();
                if lens.is_empty() {
                    return None;
                }
                let l = self.rng.pick(&lens);
                let rows_ty = match ty {
                    Ty::Mt(_, c) => Ty::Mt(l, c),
                    _ => Ty::V(l),
                };
                let ia = self.index_array(l, r, d)?;
                let x = self.gen(ty, d);
                let rows = if self.rng.chance(0.2) {
                    Ex::lit(self.rng.pick(LITS))
                } else if avail.contains(&rows_ty) || rows_ty.is_array() {
                    self.gen(rows_ty, d)
                } else {
                    return None;
                };
                let s = format!("scatter_add({}, {ia}, {})", x.s, rows.s);
                tag("scatter_add", &s);
                if matches!(ty, Ty::Mt(..)) {
                    tag("scatter_add of matrix rows", &s);
                }
                Some(Ex::of(s, x.b + dim_max(l) * rows.b, false, &[&x, &rows]).not_ts())
            }
            // `tabulate[L](i => v[idx[i]] ...)` over an index array.
            (Ty::V(l) | Ty::Mt(l, _), 8) => {
                if self.no_tabulate || l == D::N1 {
                    return None;
                }
                let elem = ty.row().unwrap();
                // Values whose rows have type `elem` and an index array of
                // length `l` for them.
                let mut cands: Vec<(usize, IntParam)> = Vec::new();
                for i in self.visible() {
                    let v = &self.env[i];
                    if v.tab || v.ty.row() != Some(elem) {
                        continue;
                    }
                    for p in self.index_arrays(Some(l), v.ty.lead()) {
                        cands.push((i, p));
                    }
                }
                if cands.is_empty() {
                    return None;
                }
                let (vi, p) = self.rng.pick(&cands);
                let v = self.use_var(vi);
                let i = self.fresh("i");
                let g = format!("{}[{}[{i}]]", v.s, p.name);
                self.tab = Some(Tab {
                    len: Len::D(l),
                    idx: i.clone(),
                });
                self.no_tabulate = true;
                let rest = self.gen(elem, d);
                self.tab = None;
                self.no_tabulate = false;
                let op = self.rng.pick(&["+", "*", "-"]);
                let conv = if self.rng.chance(0.3) {
                    format!(" + f64({}[{i}]) * 0.25", p.name)
                } else {
                    String::new()
                };
                let bound = if op == "*" {
                    v.b * rest.b
                } else {
                    v.b + rest.b
                } + dim_max(D::N) * 0.25;
                let s = format!(
                    "tabulate[{}]({i} => {g} {op} {}{conv})",
                    self.dim(l),
                    rest.s
                );
                tag("tabulate over an index array x[idx[i]]", &s);
                Some(Ex::of(s, bound, false, &[&rest]).not_ts())
            }
            // A gather `v[idx]` (of a vector's elements or a matrix's
            // rows), or a matrix's row at a run-time index `A[k]`.
            (Ty::V(l) | Ty::Mt(l, _), _) => {
                if l != D::N1 && self.rng.chance(0.7) {
                    let ranges: Vec<D> = self
                        .index_arrays(Some(l), None)
                        .iter()
                        .map(|p| p.range)
                        .filter(|&r| match ty {
                            Ty::Mt(_, c) => avail.contains(&Ty::Mt(r, c)),
                            _ => avail.contains(&Ty::V(r)),
                        })
                        .collect();
                    if ranges.is_empty() {
                        return None;
                    }
                    let r = self.rng.pick(&ranges);
                    let src = match ty {
                        Ty::Mt(_, c) => Ty::Mt(r, c),
                        _ => Ty::V(r),
                    };
                    let x = self.gen(src, d);
                    let ia = self.index_array(l, r, d)?;
                    let s = format!("{}[{ia}]", x.s);
                    tag(
                        if src.is_array() && matches!(ty, Ty::Mt(..)) {
                            "gather of matrix rows A[idx]"
                        } else {
                            "gather x[idx]"
                        },
                        &s,
                    );
                    return Some(Ex::leaf(s, x.b, false).not_ts());
                }
                // A row at a run-time index.
                let Ty::V(c) = ty else { return None };
                let mats: Vec<D> = [D::N, D::M]
                    .into_iter()
                    .filter(|&r| avail.contains(&Ty::Mt(r, c)))
                    .collect();
                if mats.is_empty() {
                    return None;
                }
                let r = self.rng.pick(&mats);
                let m = self.gen(Ty::Mt(r, c), d);
                let s = format!("{}[{}]", m.s, self.index(r, d));
                tag("run-time row A[k]", &s);
                Some(Ex::leaf(s, m.b, false).not_ts())
            }
            _ => None,
        }
    }
}

// ---------------------------------------------------------------- `match` and random numbers

/// The `match` constructs (tags, counted by program): any run-time
/// `match`, any static one, then by what is taken apart.
const MATCH_TAGS: [&str; 14] = [
    "match: run-time",
    "match: static",
    "match: on a comparison",
    "match: on an i64 from a float (arms NaN where not taken)",
    "match: on a literal or a static expression",
    "match: on a static parameter",
    "match: on `kind: i64[N]`",
    "match: on `mode: i64`",
    "match: on `robust: bool`",
    "match: on `mask: bool[N]`",
    "match: on an integer expression",
    "match: on an index array",
    "match: an arm never taken is NaN",
    "match: a helper passed `kind`",
];

/// The random-number constructs (tags, counted by program).
const KEY_TAGS: [&str; 11] = [
    "keys: random numbers",
    "keys: normal[...]",
    "keys: uniform[...]",
    "keys: split",
    "keys: random_key(seed) of the run-time `seed`",
    "keys: the parameter `key: i64[2]`",
    "keys: a key an earlier draw gave",
    "keys: a dropout mask",
    "keys: noise in an expression",
    "keys: a helper passed a key",
    "keys: a matrix of noise",
];

/// Which arms a `match` may have besides those of its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arms {
    /// Only those (a static `match`: the arm taken is its value).
    Typed,
    /// Numbers too (on an `i64[N]` or a `bool[N]`, where egrad does not
    /// broadcast other scalars, see the module doc).
    Numbers,
    /// Numbers and scalars, broadcast to the type of the others.
    Scalars,
}

/// The run-time parameters of the loss that `match` takes apart
/// (`EGRAD_RANDOM_MATCH`), after the integer ones, with the chance each
/// is drawn: `kind: i64[N]` (values from -1 to 3, see `KIND_VALUES`),
/// `mode: i64` (a count to egrad: from 0 to `MODE_MAX`), `robust: bool`
/// and `mask: bool[N]`.
const MATCH_PARAMS: [(&str, f64); 4] = [
    ("kind", 0.6),
    ("mode", 0.35),
    ("robust", 0.35),
    ("mask", 0.25),
];
const KIND_VALUES: [i64; 5] = [-1, 0, 1, 2, 3];
const MODE_MAX: usize = 3;

/// A bound of the magnitude of a standard normal number egrad draws (Box
/// and Muller's with a 32-bit uniform: at most sqrt(-2 log 2^-32) < 6.67).
const NORMAL_MAX: f64 = 6.7;

/// The seeds of `random_key(c)` keys (one past 2^32: a high word too).
const SEEDS: [u64; 7] = [0, 1, 3, 7, 42, 1234, 4_294_967_301];

/// Patterns of `kind`, `mode` and the integers from a float that the check
/// never draws: their arms are never taken (and NaN).
const NEVER: [&str; 4] = ["7", "-5 | 9", "4 | 11", "-4"];

impl Gen<'_> {
    /// The text of `match scrutinee { arms }`: arms (pattern, value)
    /// separated by commas or line breaks.
    fn match_text(&mut self, scrutinee: &str, arms: &[(String, String)]) -> String {
        let arms: Vec<String> = arms.iter().map(|(p, e)| format!("{p} => {e}")).collect();
        if self.rng.chance(0.4) {
            format!("(match {scrutinee} {{\n    {}\n  }})", arms.join("\n    "))
        } else {
            format!("(match {scrutinee} {{ {} }})", arms.join(", "))
        }
    }

    /// An arm giving `ty`, and whether it has that type: unless `full`,
    /// sometimes a number or (`Arms::Scalars`) a scalar, which the other
    /// arms broadcast to it. The `last` arm is never a number (nor a
    /// scalar known at compile time): egrad makes the arms after the
    /// first an `if` of their own, where two numbers would take a type of
    /// their own (`i64`, or `f64` in the f32 copy; see the module doc).
    fn arm(&mut self, ty: Ty, d: u32, full: bool, arms: Arms, last: bool) -> (Ex, bool) {
        let scalars = arms == Arms::Scalars;
        let other = ty != Ty::S && !full && arms != Arms::Typed && (scalars || !last);
        let (e, typed) = if other && self.rng.chance(0.3) {
            if scalars && (last || self.rng.chance(0.6)) {
                (self.gen(Ty::S, d), false)
            } else {
                (Ex::lit(self.rng.pick(LITS)), false)
            }
        } else {
            (self.gen(ty, d), true)
        };
        if last && arms != Arms::Typed && e.k && (ty == Ty::S || !typed) {
            return (self.dynamic_scalar(), typed);
        }
        (e, typed)
    }

    /// An arm that is NaN everywhere: `sqrt(-1 - e * e)` (`e` not known
    /// at compile time).
    fn nan_arm(&mut self, ty: Ty) -> String {
        let mut e = self.leaf(ty);
        if e.k && ty == Ty::S {
            e = self.dynamic_scalar();
        }
        format!("sqrt(-1 - {s} * {s})", s = e.s)
    }

    /// The arms of a `match` on an integer whose values are `values`:
    /// one to three groups of them (`1 | 2`), sometimes (if `nan`) an arm
    /// of values never drawn (`NEVER`) that is NaN, then `_`. The arms give
    /// `ty`: returns them, their values, and whether all have the type.
    fn int_arms(
        &mut self,
        ty: Ty,
        d: u32,
        values: &[i64],
        nan: bool,
        kinds: Arms,
    ) -> (Vec<(String, String)>, Vec<Ex>, bool) {
        let mut vals = values.to_vec();
        self.rng.shuffle(&mut vals);
        let groups = self.rng.range(1, 4).min(vals.len());
        let mut arms = Vec::new();
        let mut parts: Vec<Ex> = Vec::new();
        let mut full_all = true;
        let mut any_full = false;
        for g in 0..groups {
            // (Two values where enough are left for the other groups.)
            let take = if vals.len() > groups - g && self.rng.chance(0.4) {
                2
            } else {
                1
            };
            let pats: Vec<String> = vals.drain(..take).map(|v| v.to_string()).collect();
            let (e, full) = self.arm(ty, d, false, kinds, false);
            any_full |= full;
            full_all &= full;
            arms.push((pats.join(" | "), e.s.clone()));
            parts.push(e);
        }
        if nan && self.rng.chance(0.35) {
            let at = self.rng.below(arms.len() + 1);
            let e = self.nan_arm(ty);
            let pat = self.rng.pick(&NEVER).to_string();
            tag(MATCH_TAGS[12], &format!("{pat} => {e}"));
            arms.insert(at, (pat, e));
        }
        let (e, full) = self.arm(ty, d, !any_full, kinds, true);
        full_all &= full;
        arms.push(("_".into(), e.s.clone()));
        parts.push(e);
        (arms, parts, full_all)
    }

    /// A `match` giving `ty` (`EGRAD_RANDOM_MATCH`), of a form drawn among
    /// those that fit here (`params`: preferring those on the loss's
    /// parameters of its own).
    fn match_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        self.match_of(ty, d, false)
    }

    fn match_of(&mut self, ty: Ty, d: u32, params: bool) -> Option<Ex> {
        // The loss's parameters are not read in a loop's step (it reads
        // only what a loop carries).
        let rt = self.in_long == 0;
        let has = |g: &Self, p: &str| rt && g.mparams.contains(&p);
        let mut on_params = Vec::new();
        if has(self, "kind") && ty == Ty::V(D::N) {
            on_params.extend([3, 3]);
        }
        if has(self, "mask") && ty == Ty::V(D::N) {
            on_params.push(4);
        }
        if has(self, "mode") {
            on_params.push(5);
        }
        if has(self, "robust") {
            on_params.push(6);
        }
        let forms = if params && !on_params.is_empty() {
            on_params
        } else {
            let mut f = vec![0, 0, 1, 1, 2];
            f.extend(on_params);
            if self.int_ok() {
                f.push(7);
                if ty == Ty::V(D::N) && !self.index_arrays(Some(D::N), None).is_empty() {
                    f.push(8);
                }
            }
            f
        };
        let form = self.rng.pick(&forms);
        let e = match form {
            0 => self.match_cond(ty, d),
            1 => self.match_from_float(ty, d),
            2 => Some(self.match_static(ty, d)),
            4 | 6 => {
                let (p, which) = if form == 4 {
                    ("mask", MATCH_TAGS[9])
                } else {
                    ("robust", MATCH_TAGS[8])
                };
                let kinds = if form == 4 {
                    Arms::Numbers
                } else {
                    Arms::Scalars
                };
                let e = self.match_bool(p, ty, d, true, kinds);
                tag(which, &e.s);
                Some(e)
            }
            _ => {
                // (Arms never taken, NaN, on the parameters whose values
                // the check draws: `kind` and `mode`.)
                // (On an array, numbers but no other scalars as arms: see
                // the module doc.)
                let (scrutinee, values, which, nan, kinds) = match form {
                    3 => (
                        "kind".to_string(),
                        KIND_VALUES.to_vec(),
                        MATCH_TAGS[6],
                        true,
                        Arms::Numbers,
                    ),
                    5 => (
                        "mode".into(),
                        (0..=MODE_MAX as i64).collect(),
                        MATCH_TAGS[7],
                        true,
                        Arms::Scalars,
                    ),
                    7 => {
                        let e = self.iexpr(d.min(2));
                        if e.k {
                            return None;
                        }
                        (
                            e.s,
                            (-2..=3).collect(),
                            MATCH_TAGS[10],
                            false,
                            Arms::Scalars,
                        )
                    }
                    _ => {
                        let arrays = self.index_arrays(Some(D::N), None);
                        let p = self.rng.pick(&arrays);
                        let len = self.known_len(p.range) as i64;
                        (
                            p.name.into(),
                            (0..len.max(2)).collect(),
                            MATCH_TAGS[11],
                            false,
                            Arms::Numbers,
                        )
                    }
                };
                let (arms, parts, full) = self.int_arms(ty, d, &values, nan, kinds);
                let text = self.match_text(&scrutinee, &arms);
                tag(which, &text);
                let refs: Vec<&Ex> = parts.iter().collect();
                let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
                let var = full && parts.iter().all(|p| p.var);
                let mut e = Ex::of(text, b, var, &refs);
                e.k = false;
                e.ts = false;
                Some(e)
            }
        }?;
        if form != 2 {
            tag(MATCH_TAGS[0], &e.s);
        }
        Some(e)
    }

    /// `match c { true => a, false => b }` (or `false` first, or `_` for
    /// the second) on a comparison, like `if`.
    fn match_cond(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let cshape = if ty != Ty::S && self.rng.chance(0.5) {
            ty
        } else {
            Ty::S
        };
        let c = self.cond(cshape, d.min(2));
        let mut e = self.match_bool(&c.s, ty, d, false, Arms::Scalars);
        e.tab |= c.tab;
        e.ts &= c.ts;
        tag(MATCH_TAGS[2], &e.s);
        Some(e)
    }

    /// `match b { true => x, false => y }` on the bool `b`, its arms in
    /// either order, the second sometimes `_` (`rt`: a parameter, not
    /// `ts`).
    fn match_bool(&mut self, b: &str, ty: Ty, d: u32, rt: bool, kinds: Arms) -> Ex {
        let (x, fx) = self.arm(ty, d, false, kinds, false);
        let (y, fy) = self.arm(ty, d, !fx, kinds, true);
        let pats = if self.rng.chance(0.5) {
            ["true", "false"]
        } else {
            ["false", "true"]
        };
        let second = if self.rng.chance(0.3) { "_" } else { pats[1] };
        let arms = vec![
            (pats[0].to_string(), x.s.clone()),
            (second.to_string(), y.s.clone()),
        ];
        let text = self.match_text(b, &arms);
        let mut e = Ex::of(text, x.b.max(y.b), x.var && y.var && fx && fy, &[&x, &y]);
        e.k = false;
        if rt {
            e.ts = false;
        }
        e
    }

    /// `{ let u = e; match i64(tanh(u) * c) { 1 | 2 => sqrt(u), -1 | -2 =>
    /// log(-u), _ => u * 0.5 } }`: each arm is NaN (or infinite) where it is
    /// not taken; sometimes an arm the integer never takes, NaN everywhere.
    fn match_from_float(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let a = self.gen(ty, d);
        if a.k {
            return None;
        }
        let u = self.fresh("u");
        // |i64(tanh(u) * c)| >= 1 where |u| >= atanh(1 / c): 0.42 or 0.35.
        let c = self.rng.pick(&[2.5, 3.0]);
        let mut arms = vec![
            (
                self.rng.pick(&["1 | 2", "2 | 1"]).to_string(),
                format!("sqrt({u})"),
            ),
            (
                self.rng.pick(&["-1 | -2", "-2 | -1"]).to_string(),
                format!("log(-{u})"),
            ),
        ];
        let zero = self.rng.chance(0.5);
        if zero {
            arms.push(("0".into(), format!("{u} * 0.5")));
        }
        let nan = self.nan_arm(ty);
        if self.rng.chance(0.3) {
            let pat = self.rng.pick(&NEVER).to_string();
            tag(MATCH_TAGS[12], &format!("{pat} => {nan}"));
            arms.push((pat, nan.clone()));
        }
        self.rng.shuffle(&mut arms);
        let last = if !zero {
            format!("{u} * 0.5")
        } else if self.rng.chance(0.5) {
            tag(MATCH_TAGS[12], &format!("_ => {nan}"));
            nan
        } else {
            format!("{u} * 0.25")
        };
        arms.push(("_".into(), last));
        let m = self.match_text(&format!("i64(tanh({u}) * {})", fmt_lit(c)), &arms);
        let text = format!("({{ let {u} = {}; {m} }})", a.s);
        tag(MATCH_TAGS[3], &text);
        let b = a.b.sqrt().max(a.b.ln()).max(1.1).max(a.b * 0.5);
        let mut e = Ex::of(text, b, a.var, &[&a]);
        e.ts = false;
        Some(e)
    }

    /// A `match` on a value known at compile time: a literal or a static
    /// expression (an integer or a bool), or the static count `n` of the
    /// helper being generated (every arm taken by some call). Only the arm
    /// taken is checked: the others are leaves, sometimes of another type.
    fn match_static(&mut self, ty: Ty, d: u32) -> Ex {
        if let Some(n) = self.static_count.clone() {
            if self.rng.chance(0.6) {
                let (arms, parts, full) =
                    self.int_arms(ty, d.min(2), &[0, 1, 2, 3], false, Arms::Typed);
                let text = self.match_text(&n, &arms);
                tag(MATCH_TAGS[5], &text);
                tag(MATCH_TAGS[1], &text);
                let refs: Vec<&Ex> = parts.iter().collect();
                let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
                return Ex::of(text, b, full && parts.iter().all(|p| p.var), &refs);
            }
        }
        let taken = self.gen(ty, d);
        let other = |g: &mut Self| -> String {
            let t = if g.tab.is_none() && g.rng.chance(0.25) {
                let avail = g.avail();
                g.rng.pick(&avail)
            } else {
                ty
            };
            g.leaf(t).s
        };
        let (scrutinee, arms) = if self.rng.chance(0.3) {
            let (text, v) = self.rng.pick(&[
                ("true", true),
                ("false", false),
                ("1 < 2", true),
                ("2.5 <= 1", false),
            ]);
            let o = other(self);
            let (t, f) = if v {
                (taken.s.clone(), o)
            } else {
                (o, taken.s.clone())
            };
            let mut arms = vec![("true".to_string(), t), ("false".to_string(), f)];
            if self.rng.chance(0.5) {
                arms.reverse();
            }
            (text.to_string(), arms)
        } else {
            let v = self.rng.below(4) as i64;
            let text = match self.rng.below(4) {
                0 if v >= 1 => format!("{} + 1", v - 1),
                1 => format!("2 * {v} - {v}"),
                2 => format!("({v} + 4) % 4"),
                _ => v.to_string(),
            };
            let mut pats: Vec<i64> = vec![-1, 0, 1, 2, 3];
            self.rng.shuffle(&mut pats);
            let mut arms = Vec::new();
            let mut placed = false;
            let k = self.rng.range(1, 4);
            for p in pats.into_iter().take(k) {
                let e = if p == v {
                    placed = true;
                    taken.s.clone()
                } else {
                    other(self)
                };
                arms.push((p.to_string(), e));
            }
            let e = if placed { other(self) } else { taken.s.clone() };
            arms.push(("_".into(), e));
            (text, arms)
        };
        let m = self.match_text(&scrutinee, &arms);
        tag(MATCH_TAGS[4], &m);
        tag(MATCH_TAGS[1], &m);
        Ex { s: m, ..taken }
    }

    /// A key: one in scope (outside loops' steps), or `random_key(c)`.
    fn key_text(&mut self) -> String {
        if self.in_long == 0 && !self.keys.is_empty() && self.rng.chance(0.6) {
            let k = self.rng.pick(&self.keys);
            // (Tagged by a text only a use of that key has.)
            match k.as_str() {
                "key" => tag(KEY_TAGS[5], "key)"),
                "random_key(seed)" => tag(KEY_TAGS[4], &k),
                "kk" => {}
                _ => tag(KEY_TAGS[6], &format!("{k})")),
            }
            return k;
        }
        format!("random_key({})", self.rng.pick(&SEEDS))
    }

    /// `({ let (z, k) = normal[..](key); e + 0.1 * z })`: noise of `ty`
    /// (`f64[2]` for a scalar, its element 0 read) drawn in an expression,
    /// added, multiplied, or (uniform) a dropout mask.
    fn noise_expr(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        let (z, k) = (self.fresh("z"), self.fresh("k"));
        let normal = self.rng.chance(0.6);
        let dims = match ty {
            Ty::S => "2".to_string(),
            Ty::V(a) => self.dim(a),
            Ty::Mt(a, b) => format!("{}, {}", self.dim(a), self.dim(b)),
        };
        let key = self.key_text();
        let x = self.gen(ty, d);
        let zr = if ty == Ty::S {
            format!("{z}[0]")
        } else {
            z.clone()
        };
        let (dist, zb) = if normal {
            ("normal", NORMAL_MAX)
        } else {
            ("uniform", 1.0)
        };
        let (body, b, var) = match self.rng.below(3) {
            0 if !normal => (
                format!("(if {zr} < 0.2 {{ 0 }} else {{ {} * 1.25 }})", x.s),
                x.b * 1.25,
                false,
            ),
            1 => (
                format!("({} * (1 + 0.1 * {zr}))", x.s),
                x.b * (1.0 + 0.1 * zb),
                x.var,
            ),
            _ => (format!("({} + 0.1 * {zr})", x.s), x.b + 0.1 * zb, true),
        };
        let text = format!("({{ let ({z}, {k}) = {dist}[{dims}]({key}); {body} }})");
        tag(KEY_TAGS[0], &text);
        tag(KEY_TAGS[8], &text);
        tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &text);
        if body.starts_with("(if ") {
            tag(KEY_TAGS[7], &text);
        }
        let mut e = Ex::of(text, b, var, &[&x]);
        e.k = false;
        e.ts = false;
        Some(e)
    }
}

/// A noise let of the loss (`EGRAD_RANDOM_KEYS`): `let (z, k) =
/// normal[..](key)` or `uniform[..]` (of a vector or a matrix), from a key
/// in scope, a `split` of one or `random_key(c)`; `z` stays in scope, and
/// often a let uses it at once: noise added (`x + 0.1 * z`), a
/// reparameterised sample (`x + tanh(y) * z`) or a dropout mask (`if z <
/// 0.2 { 0 } else { x * 1.25 }`).
fn noise_let(g: &mut Gen, body: &mut String, lets: &mut Vec<String>, uses_m: bool) {
    let mut key = g.key_text();
    if g.rng.chance(0.3) {
        let (a, b) = (g.fresh("k"), g.fresh("k"));
        let line = format!("let ({a}, {b}) = split({key})");
        let _ = writeln!(body, "  {line}");
        tag(KEY_TAGS[3], &line);
        g.keys.push(b);
        key = a;
    }
    let mut tys = vec![Ty::V(D::N), Ty::V(D::N), Ty::V(D::N1)];
    if uses_m {
        tys.extend([Ty::V(D::M), Ty::Mt(D::N, D::M), Ty::Mt(D::N, D::M)]);
    }
    let ty = g.rng.pick(&tys);
    let normal = g.rng.chance(0.55);
    let (dist, zb) = if normal {
        ("normal", NORMAL_MAX)
    } else {
        ("uniform", 1.0)
    };
    let dims = match ty {
        Ty::Mt(a, b) => format!("{}, {}", g.dim(a), g.dim(b)),
        Ty::V(a) => g.dim(a),
        Ty::S => unreachable!("noise of a vector or a matrix"),
    };
    let (z, k) = (g.fresh("z"), g.fresh("k"));
    let line = format!("let ({z}, {k}) = {dist}[{dims}]({key})");
    let _ = writeln!(body, "  {line}");
    tag(KEY_TAGS[0], &line);
    tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &line);
    if matches!(ty, Ty::Mt(..)) {
        tag(KEY_TAGS[10], &line);
    }
    let ze = Ex {
        s: z.clone(),
        b: zb,
        var: true,
        tab: false,
        ts: true,
        k: false,
    };
    g.push_var(&z, &ze, ty);
    lets.push(z.clone());
    g.keys.push(k);
    let depth = g.rng.range(1, max_depth()) as u32;
    let r = g.rng.below(4);
    if r == 3 {
        return;
    }
    let x = g.gen(ty, depth);
    let x = g.bounded(x);
    let (text, b, var) = match r {
        0 if !normal => {
            let text = format!("if {z} < 0.2 {{ 0 }} else {{ {} * 1.25 }}", x.s);
            tag(KEY_TAGS[7], &text);
            (text, x.b * 1.25, false)
        }
        1 => {
            let sty = if g.rng.chance(0.5) { ty } else { Ty::S };
            let y = g.gen(sty, depth);
            (format!("{} + tanh({}) * {z}", x.s, y.s), x.b + zb, true)
        }
        _ => (format!("{} + 0.1 * {z}", x.s), x.b + 0.1 * zb, true),
    };
    g.mark_used(&z);
    let e = Ex::of(text, b, var, &[&x]);
    let e = g.bounded(Ex {
        s: format!("({})", e.s),
        ..e
    });
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
}

/// The program for the f32 check: `f64` made `f32`, and each number drawn
/// from a key (`let (z, k) = normal[..](key)`, `uniform[..]`: `f64`s, and
/// egrad does not convert `f64` to `f32`) rounded to a multiple of 2^-20
/// through an integer: `; let z = f32(i64(z * 1048576)) * 2^-20` after it.
fn to_f32(source: &str) -> String {
    let src = source.replace("f64", "f32");
    let mut out = String::with_capacity(src.len());
    let mut rest = src.as_str();
    loop {
        let at = ["= normal[", "= uniform["]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        // `let (z, k) ` before it: the name `z`.
        let head = &rest[..at];
        let open = head.rfind("let (").expect("a draw is a `let (z, k) = ...`");
        let name = head[open + 5..]
            .split(',')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        // The end of the call: `normal[..](key)`.
        let call = at + rest[at..].find("](").expect("`normal[..](key)`") + 1;
        let mut depth = 0;
        let mut end = call;
        for (i, ch) in rest[call..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = call + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push_str(&rest[..end]);
        let _ = write!(
            out,
            "; let {name} = f32(i64({name} * 1048576)) * 0.00000095367431640625"
        );
        rest = &rest[end..];
    }
}

/// A helper with a `match` (`EGRAD_RANDOM_MATCH`): on a static integer,
/// `fn hK[N](static c: i64, v: f64[N], a: f64) -> T = match c { 0 => ...,
/// 1 | 2 => ..., _ => ... }` (called with 0 to 3), on a static bool
/// (`static flag: bool`), or at run time on the loss's `kind` (`fn
/// hK[N](kind: i64[N], v: f64[N]) -> f64[N]`, if the loss has it).
fn gen_match_helper(rng: &mut Rng, k: usize, earlier: &[Helper], kind: bool) -> (String, Helper) {
    let name = format!("h{k}");
    let form = if kind && rng.chance(0.4) {
        2
    } else {
        rng.below(2)
    };
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    g.matches = true;
    let depth = g.rng.range(1, max_depth()) as u32;
    let arr = |g: &mut Gen, nm: &str, t: Ty| g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    let ret = if form == 2 || g.rng.chance(0.5) {
        Ty::V(D::N)
    } else {
        Ty::S
    };
    let (head, m, parts, params): (String, String, Vec<Ex>, Vec<HParam>) = match form {
        0 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            // `c` from 0 to 3, or values of it.
            let (scrutinee, values): (&str, Vec<i64>) = match g.rng.below(3) {
                0 => ("c + 1", (1..=4).collect()),
                1 => ("3 - c", (0..=3).collect()),
                _ => ("c", (-1..=3).collect()),
            };
            // (No arm NaN: every arm is taken by some call.)
            let (arms, parts, _) = g.int_arms(ret, depth, &values, false, Arms::Typed);
            let m = g.match_text(scrutinee, &arms);
            tag(MATCH_TAGS[5], &m);
            tag(MATCH_TAGS[1], &m);
            (
                format!("(static c: i64, v: f64[N], a: f64) -> {}", g.ty_text(ret)),
                m,
                parts,
                vec![
                    HParam::StaticInt,
                    HParam::Dyn(Ty::V(D::N)),
                    HParam::Dyn(Ty::S),
                ],
            )
        }
        1 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            let b = if g.rng.chance(0.3) { "!flag" } else { "flag" };
            let e = g.match_bool(b, ret, depth, false, Arms::Typed);
            tag(MATCH_TAGS[5], &e.s);
            tag(MATCH_TAGS[1], &e.s);
            (
                format!(
                    "(static flag: bool, v: f64[N], a: f64) -> {}",
                    g.ty_text(ret)
                ),
                e.s.clone(),
                vec![e],
                vec![
                    HParam::StaticBool,
                    HParam::Dyn(Ty::V(D::N)),
                    HParam::Dyn(Ty::S),
                ],
            )
        }
        _ => {
            arr(&mut g, "v", Ty::V(D::N));
            let (arms, parts, _) = g.int_arms(ret, depth, &KIND_VALUES, true, Arms::Numbers);
            let m = g.match_text("kind", &arms);
            tag(MATCH_TAGS[6], &m);
            tag(MATCH_TAGS[0], &m);
            (
                "(kind: i64[N], v: f64[N]) -> f64[N]".to_string(),
                m,
                parts,
                vec![HParam::Kind, HParam::Dyn(Ty::V(D::N))],
            )
        }
    };
    let text = format!("fn {name}[N]{head} = {m}");
    let b = parts.iter().map(|p| p.b).fold(0.0, f64::max);
    let ts = form != 2 && parts.iter().all(|p| p.ts);
    let needs_var = text.contains("max/") || text.contains("min/");
    // Generic over the element type, as `gen_helper` makes some.
    // (Not one calling a user primitive, which has no element-type
    // parameter.)
    let generic = form != 2 && g.rng.chance(0.3) && !g.made_prim;
    let text = if generic {
        text.replace("f64", "T")
            .replacen(&format!("fn {name}["), &format!("fn {name}[T, "), 1)
    } else {
        text
    };
    (
        text,
        Helper {
            name,
            params,
            rets: vec![ret],
            b,
            ts,
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1: false,
            generic,
            has_loop: g.made_loop,
            prim: g.made_prim,
            kernel: g.made_kernel,
            tags: Vec::new(),
        },
    )
}

/// A helper that draws noise from a key it is passed (`EGRAD_RANDOM_KEYS`):
/// `fn hK[N](v: f64[N], a: f64, key: i64[2]) -> f64[N] | f64 { let (z, k)
/// = normal[N](key) ... }`, sometimes from a `split` of it, its noise
/// added or a dropout mask.
fn gen_key_helper(rng: &mut Rng, k: usize, earlier: &[Helper]) -> (String, Helper) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    // (`kk`, not `key`: the tags tell the loss's `key` by its name.)
    g.keys = vec!["kk".into()];
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    }
    let mut lines = String::new();
    let mut key = "kk".to_string();
    if g.rng.chance(0.4) {
        let (a, b) = (g.fresh("k"), g.fresh("k"));
        let line = format!("let ({a}, {b}) = split(kk)");
        let _ = writeln!(lines, "  {line}");
        tag(KEY_TAGS[3], &line);
        g.keys.push(b);
        key = a;
    }
    let normal = g.rng.chance(0.6);
    let (dist, zb) = if normal {
        ("normal", NORMAL_MAX)
    } else {
        ("uniform", 1.0)
    };
    let (z, k3) = (g.fresh("z"), g.fresh("k"));
    let line = format!("let ({z}, {k3}) = {dist}[N]({key})");
    let _ = writeln!(lines, "  {line}");
    tag(KEY_TAGS[0], &line);
    tag(if normal { KEY_TAGS[1] } else { KEY_TAGS[2] }, &line);
    g.keys.push(k3);
    let ze = Ex {
        s: z.clone(),
        b: zb,
        var: true,
        tab: false,
        ts: true,
        k: false,
    };
    g.push_var(&z, &ze, Ty::V(D::N));
    let depth = g.rng.range(1, max_depth()) as u32;
    let x = g.gen(Ty::V(D::N), depth);
    let x = g.bounded(x);
    let (noisy, b) = if !normal && g.rng.chance(0.6) {
        let t = format!("(if {z} < 0.25 {{ 0 }} else {{ {} * 1.25 }})", x.s);
        tag(KEY_TAGS[7], &t);
        (t, x.b * 1.25)
    } else {
        (format!("({} + a * 0.1 * {z})", x.s), x.b + LIMIT * 0.1 * zb)
    };
    let ret = if g.rng.chance(0.5) {
        Ty::V(D::N)
    } else {
        Ty::S
    };
    let fin = if ret == Ty::S {
        let e = Ex::of(format!("(+/{noisy})"), b * N_MAX as f64, false, &[&x]);
        g.bounded(e)
    } else {
        let e = Ex::of(noisy, b, true, &[&x]);
        g.bounded(e)
    };
    let text = format!(
        "fn {name}[N](v: f64[N], a: f64, kk: i64[2]) -> {} {{\n{lines}  {}\n}}",
        g.ty_text(ret),
        fin.s
    );
    let needs_var = text.contains("max/") || text.contains("min/");
    (
        text,
        Helper {
            name,
            params: vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S), HParam::Key],
            rets: vec![ret],
            b: fin.b,
            ts: false,
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1: false,
            generic: false,
            has_loop: g.made_loop,
            prim: g.made_prim,
            kernel: g.made_kernel,
            tags: Vec::new(),
        },
    )
}

// ---------------------------------------------------------------- user primitives

/// The user primitives' constructs (tags, counted by program): functions
/// with their own derivative rules (`EGRAD_RANDOM_CUSTOM`) called, and by
/// rule, form and where; native kernels (`EGRAD_RANDOM_KERNELS`) called,
/// and by kernel and where.
const CUSTOM_TAGS: [&str; 13] = [
    "custom: a function with its own derivative rules called",
    "custom: a VJP rule only",
    "custom: a JVP rule only",
    "custom: both rules",
    "custom: element-wise",
    "custom: two parameters (a tuple cotangent)",
    "custom: a reduction to a scalar",
    "custom: on a scalar",
    "custom: on a matrix",
    "custom: differentiated by a derivative helper",
    "custom: called in a loop's step",
    "custom: called by a helper",
    "custom: a body with kinks (stable softplus)",
];

const KERNEL_TAGS: [&str; 6] = [
    "kernels: a native kernel called",
    "kernels: gelu_k (one argument)",
    "kernels: mulsin_k (two arguments)",
    "kernels: on matrices",
    "kernels: called in a loop's step",
    "kernels: called by a helper",
];

/// The element-wise functions the bodies of user primitives apply, by
/// number (see `prim_fun`).
const PRIM_FUNS: usize = 7;

/// The text of `f(u)` and of its derivative `f'(u)` for the operand `u`:
/// `sin`, `tanh`, a square, softplus (also as the stable form, whose
/// body has kinks that cancel), a Gaussian, `u * tanh(u)`.
fn prim_fun(which: usize, u: &str) -> (String, String) {
    let sigmoid = format!("(1 / (1 + exp(-{u})))");
    match which {
        0 => (format!("sin({u})"), format!("cos({u})")),
        1 => (format!("tanh({u})"), format!("(1 - tanh({u}) * tanh({u}))")),
        2 => (format!("({u} * {u})"), format!("(2 * {u})")),
        3 => (format!("log1p(exp({u}))"), sigmoid),
        4 => (format!("(max({u}, 0) + log1p(exp(-abs({u}))))"), sigmoid),
        5 => (
            format!("exp(-{u} * {u})"),
            format!("(-2 * {u} * exp(-{u} * {u}))"),
        ),
        _ => (
            format!("({u} * tanh({u}))"),
            format!("(tanh({u}) + {u} * (1 - tanh({u}) * tanh({u})))"),
        ),
    }
}

/// A bound of `|f(u)|` for `|u| <= b`.
fn prim_bound(which: usize, b: f64) -> f64 {
    match which {
        0 | 1 | 5 => 1.0,
        2 => b * b,
        3 | 4 => b + 1.0,
        _ => b,
    }
}

/// A user primitive `prK` (`EGRAD_RANDOM_CUSTOM`): a function with its own
/// derivative rules (`@custom_vjp(prK_vjp)`, `@custom_jvp(prK_jvp)` or
/// both), whose body applies an element-wise `f` (`prim_fun`) and whose
/// rules are its derivative, written out: element-wise `f(x)` of a scalar,
/// a vector or a matrix; `a * f(x) + sin(a)` of a vector and a scalar
/// (the VJP a tuple); `+/f(x)` of a vector or a matrix; `+/f(a * x)`
/// (which derivative helpers may differentiate: `(v, a) -> f64`). Its
/// text (the primitive and its rules) and how to call it.
fn gen_prim(rng: &mut Rng, k: usize) -> (String, Helper) {
    let name = format!("pr{k}");
    let which = rng.below(PRIM_FUNS);
    let form = rng.below(4);
    let rules = rng.below(3);
    let ty = match form {
        0 => rng.pick(&[Ty::S, Ty::V(D::N), Ty::V(D::N), Ty::Mt(D::N, D::M)]),
        2 => rng.pick(&[Ty::V(D::N), Ty::V(D::N), Ty::Mt(D::N, D::M)]),
        _ => Ty::V(D::N),
    };
    let (t, sizes) = match ty {
        Ty::S => ("f64", ""),
        Ty::V(_) => ("f64[N]", "[N]"),
        Ty::Mt(..) => ("f64[N, K]", "[N, K]"),
    };
    // (A rule sometimes names the derivative in a `let`.)
    let with_let = rng.chance(0.4);
    let rule = |head: String, d: &str, e: String| {
        if with_let {
            format!("fn {head} {{\n  let d = {d}\n  {e}\n}}")
        } else {
            format!("fn {head} = {e}")
        }
    };
    let (f, df) = prim_fun(which, "x");
    let (body, vjp, jvp, params, ret, b) = match form {
        0 => (
            format!("fn {name}{sizes}(x: {t}) -> {t} = {f}"),
            rule(
                format!("{name}_vjp{sizes}(x: {t}, g: {t}) -> {t}"),
                &df,
                if with_let {
                    "g * d".into()
                } else {
                    format!("g * {df}")
                },
            ),
            rule(
                format!("{name}_jvp{sizes}(x: {t}, dx: {t}) -> {t}"),
                &df,
                if with_let {
                    "d * dx".into()
                } else {
                    format!("{df} * dx")
                },
            ),
            vec![HParam::Dyn(ty)],
            ty,
            prim_bound(which, LIMIT),
        ),
        1 => (
            format!("fn {name}[N](x: f64[N], a: f64) -> f64[N] = a * {f} + sin(a)"),
            rule(
                format!("{name}_vjp[N](x: f64[N], a: f64, g: f64[N]) -> (f64[N], f64)"),
                &df,
                format!(
                    "(g * a * {}, +/(g * {f}) + cos(a) * +/g)",
                    if with_let { "d" } else { &df }
                ),
            ),
            rule(
                format!("{name}_jvp[N](x: f64[N], a: f64, dx: f64[N], da: f64) -> f64[N]"),
                &df,
                format!(
                    "a * {} * dx + ({f} + cos(a)) * da",
                    if with_let { "d" } else { &df }
                ),
            ),
            vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
            Ty::V(D::N),
            LIMIT * prim_bound(which, LIMIT) + 1.0,
        ),
        2 => (
            format!("fn {name}{sizes}(x: {t}) -> f64 = +/{f}"),
            rule(
                format!("{name}_vjp{sizes}(x: {t}, g: f64) -> {t}"),
                &df,
                if with_let {
                    "g * d".into()
                } else {
                    format!("g * {df}")
                },
            ),
            rule(
                format!("{name}_jvp{sizes}(x: {t}, dx: {t}) -> f64"),
                &df,
                if with_let {
                    "+/(d * dx)".into()
                } else {
                    format!("+/({df} * dx)")
                },
            ),
            vec![HParam::Dyn(ty)],
            Ty::S,
            ty.len_max() * prim_bound(which, LIMIT),
        ),
        _ => {
            let (fa, dfa) = prim_fun(which, "(a * x)");
            let d = if with_let {
                "d".to_string()
            } else {
                dfa.clone()
            };
            (
                format!("fn {name}[N](x: f64[N], a: f64) -> f64 = +/{fa}"),
                rule(
                    format!("{name}_vjp[N](x: f64[N], a: f64, g: f64) -> (f64[N], f64)"),
                    &dfa,
                    format!("(g * a * {d}, g * +/(x * {d}))"),
                ),
                rule(
                    format!("{name}_jvp[N](x: f64[N], a: f64, dx: f64[N], da: f64) -> f64"),
                    &dfa,
                    format!("+/({d} * (a * dx + x * da))"),
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                Ty::S,
                N_MAX as f64 * prim_bound(which, LIMIT * LIMIT),
            )
        }
    };
    let (attrs, rule_tag) = match rules {
        0 => (format!("@custom_vjp({name}_vjp)"), CUSTOM_TAGS[1]),
        1 => (format!("@custom_jvp({name}_jvp)"), CUSTOM_TAGS[2]),
        _ => {
            let (a, b) = (
                format!("@custom_vjp({name}_vjp)"),
                format!("@custom_jvp({name}_jvp)"),
            );
            let sep = if rng.chance(0.5) { " " } else { "\n" };
            if rng.chance(0.5) {
                (format!("{a}{sep}{b}"), CUSTOM_TAGS[3])
            } else {
                (format!("{b}{sep}{a}"), CUSTOM_TAGS[3])
            }
        }
    };
    let mut text = format!("{attrs}\n{body}");
    if rules != 1 {
        text = format!("{text}\n{vjp}");
    }
    if rules != 0 {
        text = format!("{text}\n{jvp}");
    }
    let mut tags = vec![
        CUSTOM_TAGS[0],
        rule_tag,
        match form {
            0 => CUSTOM_TAGS[4],
            1 | 3 => CUSTOM_TAGS[5],
            _ => CUSTOM_TAGS[6],
        },
    ];
    if form == 3 {
        tags.push(CUSTOM_TAGS[6]);
    }
    match ty {
        Ty::S => tags.push(CUSTOM_TAGS[7]),
        Ty::Mt(..) => tags.push(CUSTOM_TAGS[8]),
        Ty::V(_) => {}
    }
    if which == 4 {
        tags.push(CUSTOM_TAGS[12]);
    }
    (
        text,
        Helper {
            name,
            params,
            rets: vec![ret],
            b,
            ts: false,
            needs_var: false,
            uses_n1: false,
            generic: false,
            has_loop: false,
            prim: true,
            kernel: false,
            tags,
        },
    )
}

/// The native kernels the programs drawn with them call (registered once
/// per process, see `register_kernels`): `gelu_k(x)` (tanh's
/// approximation of GELU) and `mulsin_k(x, y) = x * sin(y)`, element by
/// element on `f64` arrays of any rank >= 1, with their VJPs.
const KERNELS: [&str; 2] = ["gelu_k", "mulsin_k"];

const GELU_C: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)

fn kernel_gelu(args: &[&[f64]], out: &mut [f64]) {
    for (o, &x) in out.iter_mut().zip(args[0]) {
        let t = (GELU_C * (x + 0.044715 * x * x * x)).tanh();
        *o = 0.5 * x * (1.0 + t);
    }
}

fn kernel_gelu_vjp(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &x), &g) in out.iter_mut().zip(args[0]).zip(args[1]) {
        let t = (GELU_C * (x + 0.044715 * x * x * x)).tanh();
        let du = GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
        *o = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
    }
}

fn kernel_mulsin(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &x), &y) in out.iter_mut().zip(args[0]).zip(args[1]) {
        *o = x * y.sin();
    }
}

fn kernel_mulsin_dx(args: &[&[f64]], out: &mut [f64]) {
    for ((o, &y), &g) in out.iter_mut().zip(args[1]).zip(args[2]) {
        *o = g * y.sin();
    }
}

fn kernel_mulsin_dy(args: &[&[f64]], out: &mut [f64]) {
    for (((o, &x), &y), &g) in out.iter_mut().zip(args[0]).zip(args[1]).zip(args[2]) {
        *o = g * x * y.cos();
    }
}

fn kernel_same_shape(args: &[egrad::Type]) -> Result<egrad::Type, String> {
    if args.iter().any(|a| *a != args[0]) {
        return Err(format!(
            "the arguments have different types: {}",
            args.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(args[0].clone())
}

/// Register `KERNELS` (once per process: the test's threads share them).
fn register_kernels() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let k = |name: &str, arity, forward, vjp| egrad::Kernel {
            name: name.into(),
            arity,
            shape: kernel_same_shape,
            forward,
            vjp,
            flops: 20.0,
        };
        egrad::register_kernel(k(KERNELS[0], 1, kernel_gelu, vec![kernel_gelu_vjp]))
            .expect("register gelu_k");
        egrad::register_kernel(k(
            KERNELS[1],
            2,
            kernel_mulsin,
            vec![kernel_mulsin_dx, kernel_mulsin_dy],
        ))
        .expect("register mulsin_k");
    });
}

/// The helpers that call the kernels (`EGRAD_RANDOM_KERNELS`): each on
/// vectors and on matrices (one or both kernels).
fn kernel_helpers(rng: &mut Rng) -> Vec<Helper> {
    let mut out = Vec::new();
    let which: Vec<usize> = match rng.below(3) {
        0 => vec![0],
        1 => vec![1],
        _ => vec![0, 1],
    };
    for w in which {
        for ty in [Ty::V(D::N), Ty::Mt(D::N, D::M)] {
            let mut tags = vec![KERNEL_TAGS[0], KERNEL_TAGS[1 + w]];
            if matches!(ty, Ty::Mt(..)) {
                tags.push(KERNEL_TAGS[3]);
            }
            out.push(Helper {
                name: KERNELS[w].into(),
                params: vec![HParam::Dyn(ty); w + 1],
                rets: vec![ty],
                // (|gelu(x)| <= |x|, |x * sin(y)| <= |x|.)
                b: LIMIT,
                ts: false,
                needs_var: false,
                uses_n1: false,
                generic: false,
                has_loop: false,
                prim: true,
                kernel: true,
                tags,
            });
        }
    }
    out
}

impl Gen<'_> {
    /// A call of a user primitive (or of a helper calling one) giving
    /// `ty`, not in the text of a `tabulate` body.
    fn prim_call(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() || self.no_tabulate {
            return None;
        }
        self.only_prim = true;
        self.call(ty, d)
    }

    /// Record the tags of a call `text` of `h`, and where it is.
    fn prim_tags(&self, h: &Helper, text: &str) {
        for &t in &h.tags {
            tag(t, text);
        }
        for (first, step, helper) in [
            (CUSTOM_TAGS[0], CUSTOM_TAGS[10], CUSTOM_TAGS[11]),
            (KERNEL_TAGS[0], KERNEL_TAGS[4], KERNEL_TAGS[5]),
        ] {
            if h.tags.contains(&first) {
                if self.in_long > 0 {
                    tag(step, text);
                }
                if self.m_name != "M" {
                    tag(helper, text);
                }
            }
        }
    }
}

/// A let of the loss that calls a user primitive (a kernel if `kernel`)
/// directly: whether one was written.
fn prim_let(g: &mut Gen, body: &mut String, lets: &mut Vec<String>, kernel: bool) -> bool {
    let mut names: Vec<String> = g
        .helpers
        .iter()
        .filter(|h| {
            let first = if kernel {
                KERNEL_TAGS[0]
            } else {
                CUSTOM_TAGS[0]
            };
            h.tags.contains(&first)
        })
        .map(|h| h.name.clone())
        .collect();
    names.dedup();
    g.rng.shuffle(&mut names);
    for name in names {
        let depth = g.rng.range(1, max_depth()) as u32;
        g.only_helper = Some(name);
        if let Some((e, ty)) = g.call_any(false, depth) {
            let name = g.fresh("a");
            g.bind_let(body, lets, name, &e, ty);
            return true;
        }
    }
    false
}

/// The share of programs an environment variable sets (a number from 0 to
/// 1), or `default`.
fn env_share(var: &str, default: f64) -> f64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// The share of programs with functions with their own derivative rules,
/// 0.07 unless `EGRAD_RANDOM_CUSTOM` (a number from 0 to 1) says otherwise.
fn custom_share() -> f64 {
    env_share("EGRAD_RANDOM_CUSTOM", 0.07)
}

/// The share of programs calling native kernels, 0.07 unless
/// `EGRAD_RANDOM_KERNELS` (a number from 0 to 1) says otherwise.
fn kernel_share() -> f64 {
    env_share("EGRAD_RANDOM_KERNELS", 0.07)
}

// ---------------------------------------------------------------- sequences of their own length

/// The most rows of a sequence parameter of the loss (`zs: f64[L]`,
/// `Zs: f64[L, B]`): `L` is drawn from 0 to this.
const L_MAX: usize = 5;

/// The largest run-time bound `u` of an `iterate_until` (drawn from 0 to
/// this).
const U_MAX: usize = 7;

/// A sequence parameter of the loss with a length `L` of its own, which
/// derivatives take (`EGRAD_RANDOM_SEQ`): `zs: f64[L]` (scalar rows) or
/// `Zs: f64[L, B]` (rows of type `f64[B]`, `B` the loss's `M` or `N`).
/// It is not a name in scope: only `seq_scan` reads it.
#[derive(Clone, Debug, PartialEq)]
struct SeqParam {
    name: &'static str,
    row: Ty,
}

impl SeqParam {
    fn text(&self, g: &Gen) -> String {
        match self.row {
            Ty::V(b) => format!("f64[L, {}]", g.dim(b)),
            _ => "f64[L]".into(),
        }
    }
}

/// A let of the loss made of a sequence construct.
#[derive(Clone, Debug)]
enum SeqLet {
    /// `scan` over a sequence parameter.
    Scan(SeqParam),
    /// `scan_all` over a sequence parameter, reduced to a scalar.
    ScanAll(SeqParam),
    /// `iterate_until` with the run-time bound `u`.
    Until,
}

/// Tags of the sequence constructs (see `SeqLet`) counted by program; in a
/// release run at least 3% of the programs must have each of them.
const SEQ_TAGS: [&str; 3] = [
    "sequence: scan over f64[L] or f64[L, B]",
    "sequence: scan_all over f64[L] or f64[L, B]",
    "iterate_until with a run-time bound u",
];

impl Gen<'_> {
    /// A `scan` of type `ty` (not a matrix) or, with `all`, a scalar made
    /// of a `scan_all` (every state after a step: a sum of the states, of
    /// their squares or of their `tanh`, per component of a tuple state),
    /// over the sequence parameter `p`: `p` itself or mapped (`tanh(zs *
    /// 2)`, `sin(zs)`, `reverse(zs)`, or `zs * tanh(v)` with `v` a scalar
    /// from outside, so that derivatives with respect to `v` also go
    /// through the sequence). The step is `scan_of`'s: a loop's step, which
    /// reads only what a loop carries along its state, and always its row;
    /// each component relaxes or drifts by at most h a step.
    fn seq_scan(&mut self, p: &SeqParam, ty: Ty, all: bool, d: u32) -> Option<Ex> {
        if matches!(ty, Ty::Mt(..)) || self.tab.is_some() {
            return None;
        }
        let name = p.name;
        let seq = match self.rng.below(10) {
            0 => format!("tanh({name} * 2)"),
            1 => format!("sin({name})"),
            2 => format!("reverse({name})"),
            3 => {
                let scalars: Vec<usize> = self
                    .visible()
                    .into_iter()
                    .filter(|&i| self.env[i].ty == Ty::S && !self.env[i].k)
                    .collect();
                if scalars.is_empty() {
                    name.to_string()
                } else {
                    let i = self.rng.pick(&scalars);
                    let v = self.use_var(i);
                    format!("({name} * tanh({}))", v.s)
                }
            }
            _ => name.to_string(),
        };
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        // A vector state is often of the rows' type (a recurrence over
        // the rows).
        let vector = |g: &mut Self| {
            if vectors.contains(&p.row) && g.rng.chance(0.5) {
                p.row
            } else {
                g.rng.pick(&vectors)
            }
        };
        let comps: Vec<Ty> = match (ty, all) {
            (Ty::S, _) => match self.rng.below(5) {
                0 | 1 if !vectors.is_empty() => vec![vector(self)],
                2 if !vectors.is_empty() => vec![vector(self), Ty::S],
                3 => vec![Ty::S, Ty::S],
                _ => vec![Ty::S],
            },
            (Ty::V(_), false) => match self.rng.below(4) {
                0 => vec![ty, Ty::S],
                1 => vec![ty, ty],
                _ => vec![ty],
            },
            _ => return None,
        };
        let (text, bounds, vars, read) =
            self.scan_of(&seq, p.row, true, &comps, L_MAX as f64, true, d);
        let text = if all {
            format!("scan_all{}", text.strip_prefix("scan")?)
        } else {
            text
        };
        let e = if all {
            if comps.len() == 1 && self.rng.chance(0.3) {
                let b = L_MAX as f64 * comps[0].len_max() * bounds[0];
                Ex::leaf(format!("(+/{text})"), b, false)
            } else {
                let names: Vec<String> = comps.iter().map(|_| self.fresh("p")).collect();
                let mut terms = Vec::new();
                let mut b = 0.0;
                for (k, nm) in names.iter().enumerate() {
                    let n = L_MAX as f64 * comps[k].len_max();
                    let (t, tb) = match self.rng.below(4) {
                        0 | 1 => (format!("+/({nm} .* {nm})"), n * bounds[k] * bounds[k]),
                        2 => (format!("+/tanh({nm})"), n),
                        _ => (format!("+/{nm}"), n * bounds[k]),
                    };
                    terms.push(t);
                    b += tb;
                }
                let pat = if names.len() == 1 {
                    names[0].clone()
                } else {
                    format!("({})", names.join(", "))
                };
                Ex::leaf(
                    format!("({{ let {pat} = {text}; {} }})", terms.join(" + ")),
                    b,
                    false,
                )
            }
            .not_ts()
        } else {
            self.untuple(text.clone(), &comps, &bounds, &vars, ty)
        };
        tag(if all { SEQ_TAGS[1] } else { SEQ_TAGS[0] }, &text);
        tag(
            if p.row == Ty::S {
                "sequence: rows are scalars (f64[L])"
            } else {
                "sequence: rows are vectors (f64[L, B])"
            },
            &text,
        );
        tag(
            match (comps.len(), comps[0]) {
                (1, Ty::S) => "sequence: scalar state",
                (1, _) => "sequence: vector state",
                _ => "sequence: tuple state",
            },
            &text,
        );
        if read {
            tag("sequence: the step reads values from outside", &text);
        }
        if seq != name {
            tag("sequence: mapped (tanh, sin, reverse, * a value)", &text);
        }
        if seq.contains("* tanh(") {
            tag("sequence: scaled by a value from outside", &text);
        }
        Some(e)
    }

    /// `iterate_until(u, init, qd => done, q => step)` of type `ty` (not a
    /// matrix) with the loss's run-time bound `u: i64` (0 to `U_MAX`): a
    /// loop with a scalar or a vector state (summed for a scalar) whose
    /// step reads only what a loop carries and relaxes or drifts like a
    /// long iterate's, stopping where a condition on the state holds: a
    /// threshold on the state (element-wise for a vector), its sum or its
    /// magnitude, or any generated condition.
    fn until_rt(&mut self, ty: Ty, d: u32) -> Option<Ex> {
        if self.tab.is_some() {
            return None;
        }
        let vectors: Vec<Ty> = self
            .avail()
            .into_iter()
            .filter(|t| matches!(t, Ty::V(_)))
            .collect();
        let (leaf, sum) = match ty {
            Ty::S if !vectors.is_empty() && self.rng.chance(0.3) => (self.rng.pick(&vectors), true),
            Ty::S => (Ty::S, false),
            Ty::V(_) => (ty, false),
            Ty::Mt(..) => return None,
        };
        let mut init = self.gen(leaf, d);
        if init.k {
            let s = self.dynamic_scalar();
            init = Ex::of(
                format!("({} + {})", init.s, s.s),
                init.b + s.b,
                init.var,
                &[&init, &s],
            );
        }
        let h = self.rng.pick(&[0.25, 0.5]);
        let form = self.rng.below(3);
        let bound = if form == 2 {
            init.b + h * U_MAX as f64
        } else {
            init.b.max(1.0)
        };
        let (saved, keep) = self.enter_step(leaf);
        self.in_long += 1;
        self.no_long += 1;
        let mark = self.env.len();
        let qd = self.fresh("q");
        self.push_var(&qd, &Ex::leaf(qd.clone(), bound, init.var), leaf);
        let crafted = self.rng.chance(0.6);
        let done = if crafted {
            let (what, positive) = match (leaf, self.rng.below(3)) {
                (Ty::S, 0) | (_, 1) => (format!("abs({qd})"), true),
                (Ty::S, _) | (_, 2) => (qd.clone(), false),
                _ => (format!("(+/{qd})"), false),
            };
            self.mark_used(&qd);
            let op = self.rng.pick(&[">", "<"]);
            let c = if positive {
                self.rng.pick(&[0.25, 0.5, 1.0, 1.5])
            } else {
                self.rng.pick(&[0.25, 0.5, 1.0, -0.25, -0.5, -1.0])
            };
            format!("({what} {op} {})", fmt_lit(c))
        } else {
            let shape = if leaf != Ty::S && self.rng.chance(0.3) {
                leaf
            } else {
                Ty::S
            };
            self.cond(shape, 1).s
        };
        self.env.truncate(mark);
        let q = self.fresh("q");
        self.push_var(&q, &Ex::leaf(q.clone(), bound, init.var), leaf);
        let dd = self.rng.range(1, 3) as u32;
        let mut f = self.gen(leaf, dd);
        for _ in 0..3 {
            // (`q + h * (q - q)` would leave the state as it is.)
            if f.s != q {
                break;
            }
            f = self.gen(leaf, dd);
        }
        let step = match form {
            0 => {
                let f = self.fit(f, bound);
                format!("({q} + {h} * ({} - {q}))", f.s)
            }
            1 => {
                let f = self.fit(f, bound);
                format!("({q} - {h} * ({q} - {}))", f.s)
            }
            _ => format!("({q} + {h} * tanh({}))", f.s),
        };
        self.env.truncate(mark);
        self.in_long -= 1;
        self.no_long -= 1;
        let read = self.leave_step(saved, keep);
        let text = format!(
            "iterate_until(u, {}, {qd} => {done}, {q} => {step})",
            init.s
        );
        tag(SEQ_TAGS[2], &text);
        tag(
            if leaf == Ty::S {
                "iterate_until(u, ...): scalar state"
            } else {
                "iterate_until(u, ...): vector state"
            },
            &text,
        );
        tag(
            if crafted {
                "iterate_until(u, ...): a threshold on the state"
            } else {
                "iterate_until(u, ...): a generated condition"
            },
            &text,
        );
        if !read.is_empty() {
            tag(
                "iterate_until(u, ...): the step reads values from outside",
                &text,
            );
        }
        let e = if sum {
            Ex::leaf(format!("(+/{text})"), leaf.len_max() * bound, false)
        } else {
            Ex::leaf(text, bound, false)
        };
        Some(e.not_ts())
    }
}

/// Write the let `what` of the loss (a sequence construct, see `SeqLet`)
/// to `body`, of a type that is available.
fn seq_let(g: &mut Gen, body: &mut String, lets: &mut Vec<String>, what: &SeqLet) {
    let depth = g.rng.range(1, max_depth()) as u32;
    let tys: Vec<Ty> = g
        .avail()
        .into_iter()
        .filter(|t| !matches!(t, Ty::Mt(..)))
        .collect();
    let made = match what {
        SeqLet::Scan(p) => {
            let ty = g.rng.pick(&tys);
            g.seq_scan(p, ty, false, depth).map(|e| (e, ty))
        }
        SeqLet::ScanAll(p) => g.seq_scan(p, Ty::S, true, depth).map(|e| (e, Ty::S)),
        SeqLet::Until => {
            // (Scalar states half of the time: most types in scope are vectors.)
            let ty = if g.rng.chance(0.5) {
                Ty::S
            } else {
                g.rng.pick(&tys)
            };
            g.until_rt(ty, depth).map(|e| (e, ty))
        }
    };
    if let Some((e, ty)) = made {
        let e = g.bounded(e);
        let name = g.fresh("a");
        g.bind_let(body, lets, name, &e, ty);
    }
}

/// A long `iterate` the generator wrote. Its count (`#C{id}#`) and step
/// size (`#H{id}#`) are placeholders until
/// `calibrate` has lowered the program and seen how many statements the
/// step is: the count is then chosen so that unrolling would just pass
/// `UNROLL_STMTS` (a loop that costs little to run and to differentiate),
/// and h so that count × h is `hc`.
#[derive(Clone, Copy, Debug)]
struct LongIt {
    hc: f64,
    /// count × statements of the step aimed at.
    target: f64,
    /// A run-time count (`n`): h is `hc` over this count (the largest the
    /// check runs).
    runtime: Option<u64>,
}

thread_local! {
    /// The long iterates of the program being generated (on this thread),
    /// by id.
    static LONGS: std::cell::RefCell<Vec<LongIt>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` with the placeholders of the long iterates filled in with
/// `counts` (by id).
fn fill(text: &str, counts: &[u64]) -> String {
    if !text.contains("#H") {
        return text.to_string();
    }
    let longs = LONGS.with(|l| l.borrow().clone());
    let mut out = text.to_string();
    for (id, (l, &c)) in longs.iter().zip(counts).enumerate() {
        let h = format!("{:.3e}", l.hc / l.runtime.unwrap_or(c) as f64);
        out = out
            .replace(&format!("#C{id}#"), &c.to_string())
            .replace(&format!("#H{id}#"), &h);
    }
    out
}

/// Every loop of `f` and of its loops' bodies with a literal count (the
/// generator writes no run-time counts): (count, statements of the step as
/// egrad weighs them).
fn loops_of(f: &Function, out: &mut Vec<(u64, usize)>) {
    for l in &f.loops {
        // (A scan's count is the length of its sequence, not a long iterate's.)
        if let (Dim::Lit(count), false) = (&l.count, l.is_scan()) {
            let count = *count;
            out.push((count, step_weight(&l.body)));
        }
        loops_of(&l.body, out);
    }
}

/// How many statements egrad counts for one step of a loop with this
/// body (what decides between a loop and unrolling): the body without
/// unpacking and packing its state (the rows `index i` of the parameter,
/// `index 0` of a scalar's row, `unindex` and the `add`s that pack), plus
/// the bodies of the loops it runs. Where a step's own statement looks like
/// packing this is less than egrad counts: the count is then higher than
/// needed, never too low.
fn step_weight(body: &Function) -> usize {
    let s = body.params[0].var;
    let rows: Vec<_> = body
        .stmts
        .iter()
        .filter(|st| matches!(st.op, Op::Index(_)) && st.args[0] == s)
        .map(|st| st.var)
        .collect();
    let scalars = body
        .stmts
        .iter()
        .filter(|st| st.op == Op::Index(0) && rows.contains(&st.args[0]))
        .count();
    let unindex = body
        .stmts
        .iter()
        .filter(|st| matches!(st.op, Op::Unindex(_)))
        .count();
    let overhead = if rows.is_empty() {
        0
    } else {
        rows.len() + scalars + 2 * unindex.saturating_sub(1) + 1
    };
    let nested: usize = body.loops.iter().map(|l| l.body.stmts.len()).sum();
    body.stmts.len().saturating_sub(overhead) + nested
}

/// Statements one run of the loop `l` executes (its loops' included).
fn loop_cost(l: &egrad::internals::ir::Loop) -> u64 {
    let inner: u64 = l.body.loops.iter().map(loop_cost).sum();
    let count = l.count.extent(&|_| None).unwrap_or(0);
    count * (l.body.stmts.len() as u64 + inner)
}

/// Loop counts (by id) for the long iterates of `src` (a program with
/// placeholders): lowered once with long counts to weigh each step, then
/// count ≈ target / weight, lowered again (and raised where egrad unrolled
/// it) until each is a loop. Returns the counts, those the check must
/// find as loops (every long iterate lowered in the first pass, and every
/// one written in `loss_text`) and the statements the loss's loops execute
/// in one evaluation.
fn calibrate(src: &str, loss_text: &str) -> (Vec<u64>, Vec<u64>, u64) {
    let longs = LONGS.with(|l| l.borrow().clone());
    let mut counts: Vec<u64> = (0..longs.len() as u64).map(|i| 3000 + 8 * i).collect();
    let present: Vec<usize> = (0..longs.len())
        .filter(|i| src.contains(&format!("#C{i}#")))
        .collect();
    if present.is_empty() {
        return (counts, Vec::new(), 0);
    }
    // The id a loop of `count` stands for (peeled steps make it up to 3
    // less than the count written).
    let owner = |counts: &[u64], count: u64| {
        present
            .iter()
            .copied()
            .find(|&i| counts[i] >= count && counts[i] - count <= 3)
    };
    let lowered = |counts: &[u64]| -> Option<(Vec<(u64, usize)>, u64)> {
        let p = Program::parse(&fill(src, counts)).ok()?;
        let mut loops = Vec::new();
        for name in p.function_names() {
            if let Ok(f) = p.ir(name) {
                loops_of(f, &mut loops);
            }
        }
        let cost = p
            .ir("loss")
            .map_or(0, |f| f.loops.iter().map(loop_cost).sum());
        Some((loops, cost))
    };
    // Counts apart by at least 4, so that each loop has one owner.
    let separate = |counts: &[u64], i: usize, mut c: u64| {
        while present.iter().any(|&j| j != i && counts[j].abs_diff(c) < 4) {
            c += 4;
        }
        c
    };
    let in_loss = |i: usize| loss_text.contains(&format!("#C{i}#"));
    let Some((loops, _)) = lowered(&counts) else {
        let expected = present.iter().map(|&i| counts[i]).collect();
        return (counts, expected, 0);
    };
    let mut weight: Vec<Option<usize>> = vec![None; longs.len()];
    for (c, w) in loops {
        if let Some(i) = owner(&counts, c) {
            weight[i] = Some(weight[i].map_or(w, |x| x.min(w)));
        }
    }
    for &i in &present {
        if let Some(w) = weight[i] {
            let c = (longs[i].target / w.max(1) as f64).ceil() as u64 + 3;
            counts[i] = separate(&counts, i, c);
        }
    }
    let mut cost = 0;
    for _ in 0..8 {
        let Some((loops, c)) = lowered(&counts) else {
            break;
        };
        cost = c;
        let found: Vec<usize> = loops.iter().filter_map(|l| owner(&counts, l.0)).collect();
        let missing: Vec<usize> = present
            .iter()
            .copied()
            .filter(|&i| weight[i].is_some() && !found.contains(&i))
            .collect();
        if missing.is_empty() {
            break;
        }
        for i in missing {
            counts[i] = separate(&counts, i, counts[i] * 5 / 4 + 1);
        }
    }
    let expected = present
        .iter()
        .filter(|&&i| weight[i].is_some() || in_loss(i))
        .map(|&i| counts[i])
        .collect();
    (counts, expected, cost)
}

// ---------------------------------------------------------------- programs

/// A generated program and what to check.
#[derive(Clone, Debug)]
struct Generated {
    source: String,
    n: usize,
    m: usize,
    /// `dloss`'s wrt, as indices of the loss's parameters.
    wrt: Vec<usize>,
    /// The index of the scalar parameter `s` (d1 and d2 exist).
    scalar: Option<usize>,
    /// `hv = @jvp(s) d1` exists.
    hv: bool,
    /// `vg = @value_and_grad(...) loss`, with dloss's wrt, exists.
    vg: bool,
    /// `jv = @jvp(...) loss` exists, with this wrt.
    jv: Option<Vec<usize>>,
    /// Constructs (see `tag`) the program has.
    tags: Vec<&'static str>,
    /// `d2` (and `hv` if chosen) were left out: egrad does not
    /// differentiate a gradient through a loop yet.
    second_dropped: bool,
    /// `hv` was chosen but left out with `d2`.
    hv_dropped: bool,
    /// `d3 = @grad(s) d2` exists (with `d2`, unless refused).
    d3: bool,
    /// `t3 = @grad(s) hv` exists (with `hv`, unless refused).
    t3: bool,
    /// Why `d3` or `t3` was left out, if egrad refused one.
    third_refused: Option<&'static str>,
    /// Counts of the long iterates that must be loops in the IR (up to 3
    /// steps less: steps of a constant state are peeled).
    loop_counts: Vec<u64>,
    /// Statements the loss's loops execute in one evaluation.
    loop_cost: u64,
    /// The loss has a run-time count `n: i64` (its last parameter): the
    /// counts to check it at (the first is the one its step sizes are made
    /// for), else empty.
    rt_counts: Vec<u64>,
    /// The loss's own text runs a loop of count `n` (its own, or a
    /// helper's it passes `n` to).
    rt_in_loss: bool,
    /// The program was drawn with the newer constructs (`scan`, `reverse`
    /// and `concat`, static recursion).
    novel: bool,
    /// The program was drawn with run-time integers.
    ints: bool,
    /// The program was drawn with nested `tabulate`s or indexed stacks.
    nest: bool,
    /// The program was drawn with `match`.
    matches: bool,
    /// The program was drawn with random numbers from keys.
    keys: bool,
    /// The program was drawn with functions with their own derivative
    /// rules, with native kernels.
    custom: bool,
    kernels: bool,
    /// The program calls a native kernel: `d2`, `hv` and `jv` are left
    /// out (`second_dropped`, `hv_dropped`, `jv_kernel`), and its f32 copy
    /// is not checked.
    kernel_used: bool,
    /// `jv` was drawn and left out: the program calls a native kernel.
    jv_kernel: bool,
    /// The helper that recurses through a static depth.
    rec_helper: Option<String>,
    /// The loss's derivatives were left out: egrad rejects them (a scan in
    /// a loop's step, see `generate_with`).
    deriv_dropped: bool,
    /// The length `L` of the sequence parameters (`zs`, `Zs`), if any.
    l: usize,
    /// The program was drawn with the sequence constructs (`scan` and
    /// `scan_all` over a sequence of length `L`, `iterate_until` with a
    /// run-time bound `u`).
    seq: bool,
    /// The indices of the loss's sequence parameters of length `L`.
    seq_params: Vec<usize>,
    /// A sequence of length `L` was drawn among `jv`'s wrt and left out:
    /// forward mode with respect to it is not supported.
    jv_seq_left_out: bool,
    /// `jv` was left out: egrad refuses it (a documented limit, this one).
    jv_refused: Option<&'static str>,
    /// Why `d2` and `hv` were left out (a documented limit, see
    /// `second_dropped`).
    second_refused: Option<&'static str>,
}

/// The documented limit of forward mode an error of egrad reports, if it
/// is one (by its message, `AdLimit` in `src/differentiate/mod.rs`): a
/// gradient through a loop, the sequence of a `scan`, or a use of a
/// loop's gradient forward mode cannot push (the tape `scan_all` reads, or
/// a gradient with respect to a sequence).
fn refused_forward(e: &str) -> Option<&'static str> {
    [
        (
            "differentiating this gradient of a `scan`",
            "a scan's gradient with respect to its sequence",
        ),
        (
            "forward mode through a scan's gradient with respect to its sequence",
            "forward mode through a scan's gradient with respect to its sequence",
        ),
        (
            "forward mode through this use of a loop's gradient",
            "forward mode through a loop's gradient (scan_all's tape, a sequence's gradient)",
        ),
    ]
    .into_iter()
    .find(|(m, _)| e.contains(m))
    .map(|r| r.1)
}

/// The share of programs with long iterates (loops), 0.2 unless
/// `EGRAD_RANDOM_LOOPS` (a number from 0 to 1) says otherwise.
fn loop_share() -> f64 {
    env_share("EGRAD_RANDOM_LOOPS", 0.2)
}

/// The most statements a loss's loops may execute in one evaluation when a
/// loop is nested in another (the interpreter runs some 10⁷ a second, and
/// checking a program evaluates the loss and its derivatives some 100
/// times): more, and the program is generated again without nesting.
const NESTED_COST: u64 = 50_000;

/// The share of programs with the newer constructs (`scan`, `reverse` and
/// `concat`, static recursion), 0.2 unless `EGRAD_RANDOM_NEW` (a number
/// from 0 to 1) says otherwise.
fn novel_share() -> f64 {
    env_share("EGRAD_RANDOM_NEW", 0.2)
}

/// The share of programs with run-time integers (`i64` parameters of the
/// loss, gathers, `scatter_add`, integer arithmetic), 0.3 unless
/// `EGRAD_RANDOM_INTS` (a number from 0 to 1) says otherwise.
fn int_share() -> f64 {
    env_share("EGRAD_RANDOM_INTS", 0.3)
}

/// The share of programs with the sequence constructs (`scan` and
/// `scan_all` over a sequence of length `L`, `iterate_until` with a run-time
/// bound), 0.15 unless `EGRAD_RANDOM_SEQ` (a number from 0 to 1) says
/// otherwise (they cost some 2.5 times as much to check as the others).
fn seq_share() -> f64 {
    env_share("EGRAD_RANDOM_SEQ", 0.15)
}

/// The share of programs with nested `tabulate`s and indexed stacks, 0.2
/// unless `EGRAD_RANDOM_NEST` (a number from 0 to 1) says otherwise.
fn nest_share() -> f64 {
    env_share("EGRAD_RANDOM_NEST", 0.2)
}

/// The share of programs with `match`, 0.08 unless `EGRAD_RANDOM_MATCH`
/// (a number from 0 to 1) says otherwise.
fn match_share() -> f64 {
    env_share("EGRAD_RANDOM_MATCH", 0.08)
}

/// The share of programs with random numbers drawn from keys, 0.08 unless
/// `EGRAD_RANDOM_KEYS` (a number from 0 to 1) says otherwise.
fn key_share() -> f64 {
    env_share("EGRAD_RANDOM_KEYS", 0.08)
}

/// The share of the loop programs with a run-time count.
const RT_SHARE: f64 = 1.0 / 3.0;

fn generate(seed: u64) -> Generated {
    let gp = generate_with(seed, true);
    if gp.loop_cost > NESTED_COST && gp.tags.contains(&"loop: inside a loop's step") {
        return generate_with(seed, false);
    }
    gp
}

fn generate_with(seed: u64, nest: bool) -> Generated {
    register_kernels();
    TAGS.with(|t| t.borrow_mut().clear());
    LONGS.with(|l| l.borrow_mut().clear());
    let mut rng = Rng(seed);
    // Whether and where loops go is drawn from a stream of its own: a
    // program without loops is the program its seed gave before loops
    // were generated.
    let mut loop_rng = Rng(mix(seed ^ 0x100B_5EED));
    let loopy = loop_rng.chance(loop_share());
    // A third of the loop programs have a run-time count `n: i64` (the
    // loss's last parameter): the step sizes are made for `rt`, and the
    // check runs the program at counts `rt`, 0 and 1.
    let mut rt_rng = Rng(mix(seed ^ 0x000C_00A7_C0DE));
    let rt = (loopy && rt_rng.chance(RT_SHARE)).then(|| rt_rng.range(40, 121) as u64);
    // The newer constructs (`scan`; `reverse` and `concat`; static
    // recursion) are drawn from a stream of their own too: a program
    // without them is the program its seed gave before they were generated.
    let mut nov_rng = Rng(mix(seed ^ 0x5CA7_C0CA_7000));
    let novel = nov_rng.chance(novel_share());
    let mut scan_on = novel && nov_rng.chance(0.6);
    let mut cat_on = novel && nov_rng.chance(0.6);
    let mut rec_on = novel && nov_rng.chance(0.5);
    if novel && !(scan_on || cat_on || rec_on) {
        match nov_rng.below(3) {
            0 => scan_on = true,
            1 => cat_on = true,
            _ => rec_on = true,
        }
    }
    // Run-time integers (`i64` parameters of the loss, gathers,
    // `scatter_add`, integer arithmetic) too.
    let mut int_rng = Rng(mix(seed ^ 0x0001_6400_1D5E));
    let ints_on = int_rng.chance(int_share());
    // Sequences of a length `L` of their own (`scan` and `scan_all` over
    // `zs: f64[L]` or `Zs: f64[L, B]`, differentiated with respect to the
    // sequence too) and `iterate_until` with a run-time bound `u: i64`:
    // a stream of their own as well.
    let mut seq_rng = Rng(mix(seed ^ 0x05E9_0F1E_4670));
    let seq_on = seq_rng.chance(seq_share());
    let mut seq_scan_on = seq_on && seq_rng.chance(0.65);
    let mut seq_all_on = seq_on && seq_rng.chance(0.6);
    let mut until_on = seq_on && seq_rng.chance(0.5);
    if seq_on && !(seq_scan_on || seq_all_on || until_on) {
        match seq_rng.below(3) {
            0 => seq_scan_on = true,
            1 => seq_all_on = true,
            _ => until_on = true,
        }
    }
    // Nested `tabulate`s and indexed stacks (values that depend on the
    // index of `tabulate`, indexed): a stream of their own as well.
    let mut nest_rng = Rng(mix(seed ^ 0x7AB5_0F7A_B500));
    let nest_any = nest_rng.chance(nest_share());
    let mut nest_on = nest_any && nest_rng.chance(0.7);
    let mut stack_on = nest_any && nest_rng.chance(0.7);
    if nest_any && !(nest_on || stack_on) {
        if nest_rng.chance(0.5) {
            nest_on = true;
        } else {
            stack_on = true;
        }
    }
    // `match` (on comparisons, static values, integers from floats and
    // run-time parameters of the loss of its own) and random numbers drawn
    // from keys: streams of their own as well.
    let mut match_rng = Rng(mix(seed ^ 0x3A7C_0000_0A75));
    let match_on = match_rng.chance(match_share());
    let mut key_rng = Rng(mix(seed ^ 0x4E15_E000_C0DE));
    let keys_on = key_rng.chance(key_share());
    // User primitives: functions with their own derivative rules, and
    // native kernels (registered from Rust): streams of their own as well.
    let mut custom_rng = Rng(mix(seed ^ 0xC057_0000_9B1E));
    let custom_on = custom_rng.chance(custom_share());
    let mut kernel_rng = Rng(mix(seed ^ 0x6E2E_1000_F00D));
    let kernels_on = kernel_rng.chance(kernel_share());
    let newer = Newer {
        matches: match_on,
        noise: keys_on,
        prims: custom_on || kernels_on,
    };
    let seq_len = seq_rng.range(0, L_MAX + 1);
    let zs = SeqParam {
        name: "zs",
        row: Ty::S,
    };
    let big_zs = SeqParam {
        name: "Zs",
        row: Ty::V(if seq_rng.chance(0.6) { D::M } else { D::N }),
    };
    let mut seq_kinds: Vec<SeqLet> = Vec::new();
    let scans = if seq_scan_on {
        1 + usize::from(seq_rng.chance(0.25))
    } else {
        0
    };
    for _ in 0..scans {
        let p = if seq_rng.chance(0.5) { &zs } else { &big_zs };
        seq_kinds.push(SeqLet::Scan(p.clone()));
    }
    if seq_all_on {
        let p = if seq_rng.chance(0.5) { &zs } else { &big_zs };
        seq_kinds.push(SeqLet::ScanAll(p.clone()));
    }
    if until_on {
        seq_kinds.push(SeqLet::Until);
    }
    // The sequence parameters the lets read.
    let seq_params: Vec<SeqParam> = [&zs, &big_zs]
        .into_iter()
        .filter(|p| {
            seq_kinds
                .iter()
                .any(|k| matches!(k, SeqLet::Scan(q) | SeqLet::ScanAll(q) if q == *p))
        })
        .cloned()
        .collect();
    let n = rng.range(2, 6);
    let m = rng.range(1, 4);
    let mut items: Vec<String> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
    // Helpers that run a loop of count `n` (their own or a callee's).
    let mut rt_helpers: Vec<String> = Vec::new();
    let nh = rng.range(1, 5);
    // The user primitives first (the helpers may call them), from their
    // own streams.
    if custom_on {
        for k in 0..1 + usize::from(custom_rng.chance(0.4)) {
            let (text, h) = gen_prim(&mut custom_rng, k + 1);
            items.push(text);
            helpers.push(h);
        }
    }
    if kernels_on {
        helpers.extend(kernel_helpers(&mut kernel_rng));
    }
    for k in 0..nh {
        let with_loop = loopy && loop_rng.chance(0.25);
        // Some helpers take the run-time count (and then have a loop).
        let rt_param = rt.filter(|_| rt_rng.chance(0.3));
        let with_loop = with_loop || rt_param.is_some();
        if let Some((text, h)) = gen_helper(
            &mut rng,
            k + 1,
            &helpers,
            with_loop,
            rt_param,
            cat_on,
            newer,
        ) {
            if rt_param.is_some() && counts_with_n(&text, &rt_helpers) {
                rt_helpers.push(h.name.clone());
            }
            items.push(text);
            helpers.push(h);
        }
    }
    // A helper that recurses through a static depth, called by the loss.
    let rec_helper = rec_on.then(|| {
        let (text, h) = gen_rec_helper(&mut rng, nh + 1, &helpers, cat_on);
        items.push(text);
        let name = h.name.clone();
        helpers.push(h);
        name
    });
    // A helper with an `i64` result (not among `helpers`: only the
    // integer expressions call it).
    let int_helper = (ints_on && int_rng.chance(0.4)).then(|| {
        let (text, h) = gen_int_helper(&mut int_rng, nh + 2);
        items.push(text);
        h
    });
    // The loss's parameters that `match` takes apart, a helper with a
    // `match`, and one that draws noise from a key it is passed.
    let mparams: Vec<&'static str> = MATCH_PARAMS
        .iter()
        .filter(|p| match_on && match_rng.chance(p.1))
        .map(|p| p.0)
        .collect();
    if match_on && match_rng.chance(0.6) {
        let (text, h) =
            gen_match_helper(&mut match_rng, nh + 3, &helpers, mparams.contains(&"kind"));
        items.push(text);
        helpers.push(h);
    }
    if keys_on && key_rng.chance(0.4) {
        let (text, h) = gen_key_helper(&mut key_rng, nh + 4, &helpers);
        items.push(text);
        helpers.push(h);
    }
    // A run-time seed `seed: i64` and a key `key: i64[2]`, after those.
    let seed_param = keys_on && key_rng.chance(0.4);
    let key_param = keys_on && key_rng.chance(0.3);
    // Loss parameters.
    let has_a = rng.chance(0.45);
    let mut params: Vec<(String, Ty)> = vec![("x".into(), Ty::V(D::N))];
    if rng.chance(0.5) {
        params.push(("y".into(), Ty::V(D::N)));
    }
    if rng.chance(0.85) {
        params.push(("s".into(), Ty::S));
    }
    if rng.chance(0.3) {
        params.push(("t".into(), Ty::S));
    }
    if has_a {
        params.push(("A".into(), Ty::Mt(D::N, D::M)));
        if rng.chance(0.6) {
            params.push(("b".into(), Ty::V(D::M)));
        }
    } else if rng.chance(0.15) {
        params.push(("b".into(), Ty::V(D::M)));
    }
    // Sequences for `scan`: parameters that no derivative takes.
    let mut seqs: Vec<(String, Ty)> = Vec::new();
    if scan_on {
        let r = nov_rng.below(3);
        if r != 1 {
            seqs.push(("xs".into(), Ty::V(D::N)));
        }
        if r != 0 {
            seqs.push(("Xs".into(), Ty::Mt(D::N, D::M)));
        }
        params.extend(seqs.iter().cloned());
    }
    let is_seq = |name: &str| seqs.iter().any(|(nm, _)| nm == name);
    rng.shuffle(&mut params);
    // The sequences of length `L` among them, anywhere (with their rows'
    // type: only their text and `uses_m` look at it).
    for p in &seq_params {
        let at = seq_rng.below(params.len() + 1);
        params.insert(at, (p.name.to_string(), p.row));
    }
    let new_seq = |name: &str| seq_params.iter().any(|p| p.name == name);
    // (A sequence `Zs: f64[L, M]` makes `M` a size, not a value of type
    // `f64[M]` in scope.)
    let m_values = params
        .iter()
        .any(|(nm, t)| !new_seq(nm) && matches!(t, Ty::V(D::M) | Ty::Mt(..)));
    let uses_m = m_values || seq_params.iter().any(|p| p.row == Ty::V(D::M));
    let lit = rng.chance(0.2).then_some((n as u64, m as u64));
    // Run-time integer parameters, after the others (so `wrt` and `jv`
    // index the same parameters): those along `M` where the loss has `M`.
    let mut iparams: Vec<IntParam> = Vec::new();
    if ints_on {
        for p in INT_PARAMS {
            let needs_m = p.len == Some(D::M) || p.range == D::M;
            if (m_values || !needs_m) && int_rng.chance(0.5) {
                iparams.push(p);
            }
        }
        if iparams.is_empty() {
            iparams.push(INT_PARAMS[int_rng.pick(&[0, 2])]);
        }
    }

    let mut g = Gen::new(&mut rng, 2, "M");
    g.lit = lit;
    g.rt_count = rt;
    g.helpers = helpers.clone();
    g.seqs = seqs.clone();
    // (Besides the scan of `scan_let`; one more for a loop's step where
    // there are loops.)
    g.scan_left = if scan_on {
        u32::from(loopy) + nov_rng.below(2) as u32
    } else {
        0
    };
    g.cat = cat_on;
    g.ints = iparams.clone();
    g.int_helper = int_helper.clone();
    g.nest = nest_on;
    g.stack_ix = stack_on;
    g.matches = match_on;
    g.mparams = mparams.clone();
    g.noise = keys_on;
    g.prims = custom_on || kernels_on;
    if seed_param {
        g.keys.push("random_key(seed)".into());
    }
    if key_param {
        g.keys.push("key".into());
    }
    for (name, ty) in &params {
        if !new_seq(name) {
            g.push_var(name, &Ex::leaf(name.clone(), 1.0, ty.is_array()), *ty);
        }
    }
    let mut size_names: Vec<&str> = match (lit, uses_m) {
        (Some(_), _) => vec![],
        (None, true) => vec!["N", "M"],
        (None, false) => vec!["N"],
    };
    if !seq_params.is_empty() {
        size_names.push("L");
    }
    let sizes = if size_names.is_empty() {
        String::new()
    } else {
        format!("[{}]", size_names.join(", "))
    };
    // A parameter's type (a sequence's has the size `L`).
    let ptext = |g: &Gen, (nm, t): &(String, Ty)| match seq_params.iter().find(|p| p.name == nm) {
        Some(p) => p.text(g),
        None => g.ty_text(*t),
    };
    let sig: Vec<String> = params
        .iter()
        .map(|p| format!("{}: {}", p.0, ptext(&g, p)))
        .collect();
    let mut sig = sig.join(", ");
    for p in &iparams {
        match p.len {
            Some(l) => {
                let _ = write!(sig, ", {}: i64[{}]", p.name, g.dim(l));
            }
            None => {
                let _ = write!(sig, ", {}: i64", p.name);
            }
        }
    }
    for p in &mparams {
        let ty = match *p {
            "kind" => format!("i64[{}]", g.dim(D::N)),
            "mode" => "i64".into(),
            "robust" => "bool".into(),
            _ => format!("bool[{}]", g.dim(D::N)),
        };
        let _ = write!(sig, ", {p}: {ty}");
    }
    if seed_param {
        sig.push_str(", seed: i64");
    }
    if key_param {
        sig.push_str(", key: i64[2]");
    }
    if until_on {
        sig.push_str(", u: i64");
    }
    if rt.is_some() {
        sig.push_str(", n: i64");
    }
    let mut body = String::new();
    let nlets = g.rng.range(1, 5);
    let mut lets: Vec<String> = Vec::new();
    // A loop as one of the lets (most loop programs), more at random, and
    // sometimes one inside a loop's step.
    let loop_let = (loopy && loop_rng.chance(0.85)).then(|| loop_rng.below(nlets));
    if loopy {
        g.long_left = loop_rng.below(2) as u32;
        g.nest_left = u32::from(loop_rng.chance(0.3) && nest);
    }
    // With a run-time count, most losses call a helper that takes one (if
    // there is one) in a let.
    let rt_call_let = (rt.is_some() && rt_rng.chance(0.7)).then(|| rt_rng.below(nlets));
    // A scan as one of the lets, and a call of the recursive helper.
    let scan_let = scan_on.then(|| nov_rng.below(nlets));
    let rec_let = rec_helper.as_ref().map(|_| nov_rng.below(nlets));
    // A let made with run-time integers.
    let int_let = ints_on.then(|| int_rng.below(nlets));
    // The sequence lets, each before one of the lets or after them all.
    let seq_slots: Vec<usize> = seq_kinds.iter().map(|_| seq_rng.below(nlets + 1)).collect();
    // A let that is a nested `tabulate`, and one that is a `tabulate`
    // indexing a stack.
    let nest_let = nest_on.then(|| nest_rng.below(nlets));
    let stack_let = stack_on.then(|| nest_rng.below(nlets));
    // A let that is a `match` (on the loss's parameters of its own where it
    // has some), and one or two noise lets (before the let of their slot).
    let match_let = match_on.then(|| match_rng.below(nlets));
    let noise_slots: Vec<usize> = if keys_on {
        let k = 1 + usize::from(key_rng.chance(0.3));
        (0..k).map(|_| key_rng.below(nlets)).collect()
    } else {
        Vec::new()
    };
    // A let that calls a user primitive, and one that calls a kernel.
    let custom_let = custom_on.then(|| custom_rng.below(nlets));
    let kernel_let = kernels_on.then(|| kernel_rng.below(nlets));
    let mut custom_pending = false;
    let mut kernel_pending = false;
    let mut match_pending = false;
    // (From `rec_let` on, until a call is written; likewise the nested
    // `tabulate` and the indexed stack, from their lets on.)
    let mut rec_pending = false;
    let mut nest_pending = false;
    let mut stack_pending = false;
    for li in 0..nlets {
        for (what, _) in seq_kinds.iter().zip(&seq_slots).filter(|k| *k.1 == li) {
            seq_let(&mut g, &mut body, &mut lets, what);
        }
        for _ in noise_slots.iter().filter(|&&k| k == li) {
            noise_let(&mut g, &mut body, &mut lets, uses_m);
        }
        let avail = g.avail();
        rec_pending |= rec_let == Some(li);
        // (From their lets on, until one is written.)
        custom_pending |= custom_let == Some(li);
        kernel_pending |= kernel_let == Some(li);
        if scan_let == Some(li) {
            let tys: Vec<Ty> = avail
                .iter()
                .copied()
                .filter(|t| !matches!(t, Ty::Mt(..)))
                .collect();
            let ty = g.rng.pick(&tys);
            let depth = g.rng.range(1, max_depth()) as u32;
            if let Some(e) = g.scan_expr(ty, depth) {
                let e = g.bounded(e);
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        if rec_pending {
            let depth = g.rng.range(1, max_depth()) as u32;
            g.only_helper = rec_helper.clone();
            if let Some((e, ty)) = g.call_any(false, depth) {
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                rec_pending = false;
                continue;
            }
        }
        if rt_call_let == Some(li) && loop_let != Some(li) {
            let depth = g.rng.range(1, max_depth()) as u32;
            g.only_rt = true;
            let call = g.call_any(false, depth);
            g.only_rt = false;
            if let Some((e, ty)) = call {
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        if loop_let == Some(li) {
            let tys: Vec<Ty> = avail
                .iter()
                .copied()
                .filter(|t| !matches!(t, Ty::Mt(..)))
                .collect();
            let ty = g.rng.pick(&tys);
            let depth = g.rng.range(1, max_depth()) as u32;
            let e = g.with_loop(ty, depth);
            let name = g.fresh("a");
            g.bind_let(&mut body, &mut lets, name, &e, ty);
            continue;
        }
        if int_let == Some(li) {
            // Mostly a gather, `scatter_add` or `tabulate` over an index
            // array (so that many programs have each), else any kind.
            let depth = g.rng.range(1, max_depth()) as u32;
            let kind = g.rng.pick(&[7, 7, 7, 7, 7, 9, 9, 9, 8, 8]);
            let made = (0..12).find_map(|attempt| {
                let ty = g.rng.pick(&avail);
                let kind = if attempt < 8 { kind } else { g.rng.below(10) };
                g.int_float_of(ty, depth, kind).map(|e| (e, ty))
            });
            if let Some((e, ty)) = made {
                let e = g.bounded(e);
                let name = g.fresh("a");
                g.bind_let(&mut body, &mut lets, name, &e, ty);
                continue;
            }
        }
        match_pending |= match_let == Some(li);
        if match_pending && match_let_of(&mut g, &mut body, &mut lets) {
            match_pending = false;
            continue;
        }
        if custom_pending && prim_let(&mut g, &mut body, &mut lets, false) {
            custom_pending = false;
            continue;
        }
        if kernel_pending && prim_let(&mut g, &mut body, &mut lets, true) {
            kernel_pending = false;
            continue;
        }
        nest_pending |= nest_let == Some(li);
        stack_pending |= stack_let == Some(li);
        if (nest_pending || stack_pending)
            && nest_lets(
                &mut g,
                &mut body,
                &mut lets,
                &mut nest_pending,
                &mut stack_pending,
            )
        {
            continue;
        }
        let r = g.rng.below(10);
        if r < 2 {
            // A tuple-returning helper.
            let tuple_helpers: Vec<Helper> = g
                .helpers
                .iter()
                .filter(|h| h.rets.len() == 2)
                .cloned()
                .collect();
            if !tuple_helpers.is_empty() {
                let h = g.rng.pick(&tuple_helpers);
                // Its params are (v: f64[N], a: f64) or (a: f64, c: f64).
                let mut args = Vec::new();
                for p in &h.params {
                    if let HParam::Dyn(t) = p {
                        let mut a = g.gen(*t, 2);
                        if h.needs_var && t.is_array() && !a.var {
                            a = g.leaf(*t);
                        }
                        args.push(a.s);
                    }
                }
                let call = format!("{}({})", h.name, args.join(", "));
                let (p1, p2) = (g.fresh("a"), g.fresh("a"));
                let _ = writeln!(body, "  let ({p1}, {p2}) = {call}");
                let inf = Ex {
                    s: call,
                    b: f64::INFINITY,
                    var: false,
                    tab: false,
                    ts: true,
                    k: false,
                };
                g.push_var(&p1, &inf, h.rets[0]);
                g.push_var(&p2, &inf, h.rets[1]);
                // Bound them before use.
                for (p, t) in [(p1.clone(), h.rets[0]), (p2.clone(), h.rets[1])] {
                    let _ = writeln!(body, "  let {p} = tanh({p})");
                    let e = Ex::leaf(p.clone(), 1.0, false);
                    g.push_var(&p, &e, t);
                    lets.push(p);
                }
                continue;
            }
        }
        let depth = g.rng.range(1, max_depth()) as u32;
        // Most losses call a helper (half of the time a derivative one).
        let forced = if lets.is_empty() && g.rng.chance(0.75) {
            let deriv = g.rng.chance(0.5);
            g.call_any(deriv, depth)
        } else {
            None
        };
        let (e, ty) = match forced {
            Some(r) => r,
            None => {
                let ty = g.rng.pick(&avail);
                (g.gen(ty, depth), ty)
            }
        };
        // Sometimes shadow an earlier let of the same type.
        let name = match lets
            .iter()
            .rev()
            .find(|l| g.env.iter().rev().find(|v| &v.name == *l).map(|v| v.ty) == Some(ty))
        {
            Some(l) if g.rng.chance(0.2) => l.clone(),
            _ => g.fresh("a"),
        };
        g.bind_let(&mut body, &mut lets, name, &e, ty);
    }
    for (what, _) in seq_kinds.iter().zip(&seq_slots).filter(|k| *k.1 == nlets) {
        seq_let(&mut g, &mut body, &mut lets, what);
    }
    if rec_pending {
        // The scan took the let meant for the call: one more let.
        let depth = g.rng.range(1, max_depth()) as u32;
        g.only_helper = rec_helper.clone();
        if let Some((e, ty)) = g.call_any(false, depth) {
            let name = g.fresh("a");
            g.bind_let(&mut body, &mut lets, name, &e, ty);
        }
    }
    // (Lets that found no slot.)
    if match_pending {
        match_let_of(&mut g, &mut body, &mut lets);
    }
    if custom_pending {
        prim_let(&mut g, &mut body, &mut lets, false);
    }
    if kernel_pending {
        prim_let(&mut g, &mut body, &mut lets, true);
    }
    while nest_pending || stack_pending {
        nest_lets(
            &mut g,
            &mut body,
            &mut lets,
            &mut nest_pending,
            &mut stack_pending,
        );
    }
    let depth = g.rng.range(1, max_depth()) as u32;
    let fin = g.gen(Ty::S, depth);
    let mut result = fin.s.clone();
    // Use every let that nothing used.
    let vis = g.visible();
    for i in vis {
        let v = g.env[i].clone();
        if v.used || !lets.contains(&v.name) {
            continue;
        }
        match v.ty {
            Ty::S => result = format!("{result} + {}", v.name),
            _ => result = format!("{result} + +/{}", v.name),
        }
    }
    let _ = writeln!(body, "  {result}");
    items.push(format!("fn loss{sizes}({sig}) -> f64 {{\n{body}}}"));
    // Loop counts for the steps as written (helpers and the loss).
    let (counts, loop_counts, loop_cost) = calibrate(&items.join("\n\n"), &body);

    // The gradient of a random subset, in a random order.
    // (never a sequence of `scan`).
    let mut wrt: Vec<usize> = (0..params.len())
        .filter(|&i| !is_seq(&params[i].0))
        .collect();
    g.rng.shuffle(&mut wrt);
    let keep = g.rng.range(1, wrt.len() + 1);
    wrt.truncate(keep);
    // Mostly with respect to a sequence of length `L` too, where there is one.
    let seq_idx: Vec<usize> = (0..params.len())
        .filter(|&i| new_seq(&params[i].0))
        .collect();
    if !seq_idx.is_empty() && !wrt.iter().any(|i| seq_idx.contains(i)) && seq_rng.chance(0.85) {
        let i = seq_rng.pick(&seq_idx);
        let at = seq_rng.below(wrt.len() + 1);
        wrt.insert(at, i);
    }
    let mut args: Vec<&str> = params.iter().map(|(nm, _)| nm.as_str()).collect();
    args.extend(iparams.iter().map(|p| p.name));
    args.extend(mparams.iter());
    if seed_param {
        args.push("seed");
    }
    if key_param {
        args.push("key");
    }
    if until_on {
        args.push("u");
    }
    if rt.is_some() {
        args.push("n");
    }
    let args = args.join(", ");
    let names: Vec<&str> = wrt.iter().map(|&i| params[i].0.as_str()).collect();
    let tys: Vec<String> = wrt.iter().map(|&i| ptext(&g, &params[i])).collect();
    let ret = if tys.len() == 1 {
        tys[0].clone()
    } else {
        format!("({})", tys.join(", "))
    };
    items.push(format!(
        "@grad({})\nfn dloss{sizes}({sig}) -> {ret} = loss({args})",
        names.join(", ")
    ));
    let scalar = params.iter().position(|(nm, _)| nm == "s");
    let mut hv = false;
    let mut second: Vec<String> = Vec::new();
    if scalar.is_some() {
        items.push(format!(
            "@grad(s)\nfn d1{sizes}({sig}) -> f64 = loss({args})"
        ));
        second.push(format!("@grad(s)\nfn d2{sizes}({sig}) -> f64 = d1({args})"));
        // A Hessian-vector product: forward over reverse.
        if g.rng.chance(0.5) {
            hv = true;
            second.push(format!(
                "@jvp(s)\nfn hv{sizes}({sig}, ds: f64) -> f64 = d1({args})"
            ));
        }
    }
    // Should egrad refuse a second derivative (through a loop it goes by
    // forward mode), the program has no `d2` and `hv` (and the check
    // counts it).
    let mut second_dropped = false;
    let mut second_refused = None;
    let scans = items.iter().any(|t| t.contains("scan("));
    // A program calling a native kernel has no second derivative (a
    // kernel's VJP has none) and no forward mode (a kernel has none): its
    // `d2`, `hv` and `jv` are left out (and counted), and its f32 copy is
    // not checked (kernels take `f64`s).
    let kernel_used = kernels_on
        && items
            .iter()
            .any(|t| KERNELS.iter().any(|k| t.contains(&format!("{k}("))));
    if kernel_used && !second.is_empty() {
        second_dropped = true;
    } else if (!loop_counts.is_empty() || rt.is_some() || scans || seq_on) && !second.is_empty() {
        let with = [items.as_slice(), second.as_slice()].concat().join("\n\n");
        if let Err(e) = Program::parse(&fill(&with, &counts)) {
            second_refused = refused_forward(&e.to_string());
            second_dropped = second_refused.is_some();
        }
    }
    let hv_dropped = hv && second_dropped;
    if second_dropped {
        hv = false;
    } else {
        items.extend(second);
    }
    // Third derivatives in `s`: reverse three times (`d3 = @grad(s) d2`)
    // and reverse over forward over reverse (`t3 = @grad(s) hv`, the
    // shape that came out as 0 through a loop, issue 32). They take no
    // random number, so a seed gives the program it gave before, plus
    // these. Should egrad refuse one (a documented limit: `unsupported`)
    // or find it too large (a `limit`), it is left out and counted.
    let mut third: Vec<String> = Vec::new();
    if scalar.is_some() && !second_dropped && !kernel_used {
        third.push(format!("@grad(s)\nfn d3{sizes}({sig}) -> f64 = d2({args})"));
        if hv {
            third.push(format!(
                "@grad(s)\nfn t3{sizes}({sig}, ds: f64) -> f64 = hv({args}, ds)"
            ));
        }
    }
    // Each is tried alone (`t3` goes through loops where `d3` stops).
    let mut third_refused = None;
    let mut kept = Vec::new();
    for t in third {
        let with = [items.as_slice(), std::slice::from_ref(&t)]
            .concat()
            .join("\n\n");
        let refused = match Program::parse(&fill(&with, &counts)) {
            Err(e) if e.kind() == ErrorKind::Unsupported => {
                Some("a documented limit of reverse mode")
            }
            Err(e) if e.kind() == ErrorKind::Limit => Some("too many operations"),
            // Anything else is a bug: kept, so the program fails to check.
            _ => None,
        };
        match refused {
            Some(r) => third_refused = Some(r),
            None => kept.push(t),
        }
    }
    let d3 = kept.iter().any(|t| t.contains("fn d3"));
    let t3 = kept.iter().any(|t| t.contains("fn t3"));
    items.extend(kept);
    // The value and the gradient from one sweep.
    let vg = g.rng.chance(0.5);
    if vg {
        items.push(format!(
            "@value_and_grad({})\nfn vg{sizes}({sig}) -> (f64, {}) = loss({args})",
            names.join(", "),
            tys.join(", ")
        ));
    }
    // Forward mode along random tangents of a random subset.
    let jv = g.rng.chance(0.6).then(|| {
        let mut jw: Vec<usize> = (0..params.len())
            .filter(|&i| !is_seq(&params[i].0))
            .collect();
        g.rng.shuffle(&mut jw);
        let keep = g.rng.range(1, jw.len() + 1);
        jw.truncate(keep);
        jw
    });
    // Forward mode with respect to a sequence of length `L` is not
    // supported (an error): such a sequence is left out of `jv`'s wrt (and
    // `jv` with it if it had nothing else), and counted.
    let mut jv_seq_left_out = false;
    let mut jv = jv.and_then(|mut jw| {
        let before = jw.len();
        jw.retain(|i| !seq_idx.contains(i));
        jv_seq_left_out = jw.len() < before;
        (!jw.is_empty()).then_some(jw)
    });
    let jv_kernel = kernel_used && jv.is_some();
    if jv_kernel {
        jv = None;
    }
    let mut jv_refused = None;
    if let Some(jw) = &jv {
        let names: Vec<&str> = jw.iter().map(|&i| params[i].0.as_str()).collect();
        let tans: Vec<String> = jw
            .iter()
            .map(|&i| format!("d{}: {}", params[i].0, ptext(&g, &params[i])))
            .collect();
        items.push(format!(
            "@jvp({})\nfn jv{sizes}({sig}, {}) -> f64 = loss({args})",
            names.join(", "),
            tans.join(", ")
        ));
        // A sequence scaled by a value `jv` takes is still forward mode
        // with respect to the sequence: then `jv` is left out (counted).
        if seq_on {
            if let Err(e) = Program::parse(&fill(&items.join("\n\n"), &counts)) {
                let e = e.to_string();
                jv_refused = refused_forward(&e).filter(|_| e.contains("`jv` cannot"));
                if jv_refused.is_some() {
                    items.pop();
                }
            }
        }
    }
    if jv_refused.is_some() {
        jv = None;
    }
    // A scan in a loop's step over a sequence the loop carries: egrad once
    // rejected every derivative through that loop (fixed, see the module
    // doc); a documented limit it still reports there leaves the loss's
    // derivatives out (counted and printed); its value is still checked.
    let mut deriv_dropped = false;
    let nested_scan = TAGS.with(|t| {
        t.borrow()
            .iter()
            .any(|(name, _)| *name == "scan: inside a loop's step")
    });
    if nested_scan {
        if let Err(e) = Program::parse(&fill(&items.join("\n\n"), &counts)) {
            if e.to_string().contains("is not supported yet") {
                let derivs = ["dloss", "vg", "jv", "d1", "d2", "hv"];
                items.retain(|t| {
                    !derivs.iter().any(|d| {
                        t.contains(&format!("\nfn {d}(")) || t.contains(&format!("\nfn {d}["))
                    })
                });
                deriv_dropped = true;
            }
        }
    }
    rng.shuffle(&mut items);
    let source = fill(&(items.join("\n\n") + "\n"), &counts);
    let mut tags: Vec<&'static str> = TAGS.with(|t| {
        t.borrow()
            .iter()
            .filter(|(_, text)| source.contains(fill(text, &counts).as_str()))
            .map(|(name, _)| *name)
            .collect()
    });
    tags.sort_unstable();
    tags.dedup();
    Generated {
        l: seq_len,
        seq: seq_on,
        seq_params: seq_idx,
        jv_seq_left_out,
        jv_refused,
        second_refused,
        rt_counts: rt.map_or(Vec::new(), |c| vec![c, 0, 1]),
        rt_in_loss: rt.is_some() && counts_with_n(&body, &rt_helpers),
        novel,
        ints: ints_on,
        nest: nest_any,
        matches: match_on,
        keys: keys_on,
        custom: custom_on,
        kernels: kernels_on,
        kernel_used,
        jv_kernel,
        rec_helper,
        deriv_dropped,
        source,
        tags,
        second_dropped,
        hv_dropped,
        d3,
        t3,
        third_refused,
        loop_counts,
        loop_cost,
        hv,
        vg,
        jv,
        n,
        m,
        wrt,
        scalar,
    }
}

/// A let of the loss that is a `match` (on its parameters of its own where
/// it has some): whether one was written.
fn match_let_of(g: &mut Gen, body: &mut String, lets: &mut Vec<String>) -> bool {
    let avail = g.avail();
    let depth = g.rng.range(1, max_depth()) as u32;
    let made = (0..8).find_map(|attempt| {
        let ty = if attempt < 4 && g.mparams.iter().any(|p| *p == "kind" || *p == "mask") {
            Ty::V(D::N)
        } else {
            g.rng.pick(&avail)
        };
        g.match_of(ty, depth, true).map(|e| (e, ty))
    });
    let Some((e, ty)) = made else {
        return false;
    };
    let e = g.bounded(e);
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
    true
}

/// A let of the loss that is a nested `tabulate` (if `nest`) or else a
/// `tabulate` indexing a stack (if `stack`), clearing the flag of the one
/// written: whether one was.
fn nest_lets(
    g: &mut Gen,
    body: &mut String,
    lets: &mut Vec<String>,
    nest: &mut bool,
    stack: &mut bool,
) -> bool {
    let avail = g.avail();
    let depth = g.rng.range(1, max_depth()) as u32;
    let made = (0..8).find_map(|_| {
        let ty = g.rng.pick(&avail);
        let e = if *nest {
            g.nested_tab(ty, depth)
        } else {
            g.stack_tab(ty, depth)
        };
        e.map(|e| (e, ty))
    });
    let Some((e, ty)) = made else {
        // (None fits: the flag is cleared all the same.)
        if *nest {
            *nest = false;
        } else {
            *stack = false;
        }
        return false;
    };
    if *nest {
        *nest = false;
    } else {
        *stack = false;
    }
    let e = g.bounded(e);
    let name = g.fresh("a");
    g.bind_let(body, lets, name, &e, ty);
    true
}

/// Whether `text` runs a loop of count `n`: its own `iterate(n, ...)`, or
/// a call passing `n` to one of `rt_helpers`.
fn counts_with_n(text: &str, rt_helpers: &[String]) -> bool {
    text.contains("iterate(n, ")
        || rt_helpers
            .iter()
            .any(|h| text.contains(&format!("{h}(n, ")))
}

/// A helper with an `i64` result, `fn h[N](v: f64[N], k: i64) -> i64`,
/// whose callers pass an index of `v` for `k`: its text, and its name and
/// a bound of its result.
fn gen_int_helper(rng: &mut Rng, k: usize) -> (String, (String, f64)) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    g.fresh = 100 * k;
    g.push_var("v", &Ex::leaf("v", LIMIT, true), Ty::V(D::N));
    g.ints = vec![INT_PARAMS[0]];
    let depth = g.rng.range(1, 3) as u32;
    let e = g.iexpr(depth);
    let text = format!(
        "fn {name}[N](v: f64[N], k: i64) -> i64 = {}",
        g.int_value(&e)
    );
    (text, (name, e.b))
}

/// What helpers may also write (in the programs drawn with it): `match`
/// (`EGRAD_RANDOM_MATCH`), noise drawn from keys (`EGRAD_RANDOM_KEYS`).
#[derive(Clone, Copy, Debug, Default)]
struct Newer {
    matches: bool,
    noise: bool,
    /// User primitives may be called at random (`EGRAD_RANDOM_CUSTOM`,
    /// `EGRAD_RANDOM_KERNELS`).
    prims: bool,
}

/// One helper function: its text and how to call it.
fn gen_helper(
    rng: &mut Rng,
    k: usize,
    earlier: &[Helper],
    with_loop: bool,
    rt_param: Option<u64>,
    cat: bool,
    newer: Newer,
) -> Option<(String, Helper)> {
    let name = format!("h{k}");
    let kind = rng.below(12);
    let mut g = Gen::new(rng, 1, "K");
    g.helpers = earlier.to_vec();
    g.fresh = 100 * k;
    g.cat = cat;
    g.matches = newer.matches;
    g.noise = newer.noise;
    g.prims = newer.prims;
    // (A derivative helper of one calling a user primitive.)
    let mut src_prim = false;
    let arr = |g: &mut Gen, nm: &str, t: Ty| g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    let depth = g.rng.range(1, max_depth()) as u32;
    // A helper with a loop sometimes takes a run-time count `n: i64` first.
    // (a helper of the first four kinds).
    let kind = if rt_param.is_some() { kind % 4 } else { kind };
    g.rt_count = rt_param;
    let (text, params, rets, b, ts) = match kind {
        // (v: f64[N], a: f64) -> f64 | f64[N]
        0..=2 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            let rt = if kind == 0 { Ty::S } else { Ty::V(D::N) };
            let e = if with_loop {
                g.with_loop(rt, depth)
            } else {
                g.gen(rt, depth)
            };
            (
                format!(
                    "fn {name}[N](v: f64[N], a: f64) -> {} = {}",
                    g.ty_text(rt),
                    e.s
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![rt],
                e.b,
                e.ts,
            )
        }
        // (a: f64, c: f64) -> f64
        3 => {
            arr(&mut g, "a", Ty::S);
            arr(&mut g, "c", Ty::S);
            let e = if with_loop {
                g.with_loop(Ty::S, depth)
            } else {
                g.gen(Ty::S, depth)
            };
            (
                format!("fn {name}(a: f64, c: f64) -> f64 = {}", e.s),
                vec![HParam::Dyn(Ty::S), HParam::Dyn(Ty::S)],
                vec![Ty::S],
                e.b,
                e.ts,
            )
        }
        // (v: f64[N]) -> f64[N-1]
        4 => {
            g.allow_n1 = true;
            arr(&mut g, "v", Ty::V(D::N));
            let e = g.gen(Ty::V(D::N1), depth);
            (
                format!("fn {name}[N](v: f64[N]) -> f64[N-1] = {}", e.s),
                vec![HParam::Dyn(Ty::V(D::N))],
                vec![Ty::V(D::N1)],
                e.b,
                false,
            )
        }
        // (P: f64[N, K], v: f64[K]) -> f64[N]
        5 => {
            arr(&mut g, "P", Ty::Mt(D::N, D::M));
            arr(&mut g, "v", Ty::V(D::M));
            let e = g.gen(Ty::V(D::N), depth);
            (
                format!(
                    "fn {name}[N, K](P: f64[N, K], v: f64[K]) -> f64[N] = {}",
                    e.s
                ),
                vec![HParam::Dyn(Ty::Mt(D::N, D::M)), HParam::Dyn(Ty::V(D::M))],
                vec![Ty::V(D::N)],
                e.b,
                false,
            )
        }
        // (static n: i64, v: f64[N], a: f64) -> f64[N] with iterate(n, ...)
        6 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            g.static_count = Some("n".into());
            let e = loop {
                if let Some(e) = g.iterate(Ty::V(D::N), depth) {
                    break e;
                }
            };
            (
                format!(
                    "fn {name}[N](static n: i64, v: f64[N], a: f64) -> f64[N] {{\n  let r = {}\n  r\n}}",
                    e.s
                ),
                vec![HParam::StaticInt, HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![Ty::V(D::N)],
                e.b,
                e.ts,
            )
        }
        // (static c: f64, static flag: bool, a: f64, v: f64[N]) -> f64
        7 => {
            let ce = Ex {
                s: "c".into(),
                b: 3.0,
                var: false,
                tab: false,
                ts: true,
                k: true,
            };
            g.push_var("c", &ce, Ty::S);
            arr(&mut g, "a", Ty::S);
            arr(&mut g, "v", Ty::V(D::N));
            let e1 = g.gen(Ty::S, depth);
            let e2 = g.gen(Ty::S, depth);
            (
                format!(
                    "fn {name}[N](static c: f64, static flag: bool, a: f64, v: f64[N]) -> f64 {{\n  if flag {{ {} }} else {{ {} }}\n}}",
                    e1.s, e2.s
                ),
                vec![
                    HParam::StaticReal,
                    HParam::StaticBool,
                    HParam::Dyn(Ty::S),
                    HParam::Dyn(Ty::V(D::N)),
                ],
                vec![Ty::S],
                e1.b.max(e2.b),
                e1.ts && e2.ts,
            )
        }
        // (v: f64[N], a: f64) -> (f64, f64[N])
        8 => {
            arr(&mut g, "v", Ty::V(D::N));
            arr(&mut g, "a", Ty::S);
            let e1 = g.gen(Ty::S, depth);
            let e2 = g.gen(Ty::V(D::N), depth);
            (
                format!(
                    "fn {name}[N](v: f64[N], a: f64) -> (f64, f64[N]) = ({}, {})",
                    e1.s, e2.s
                ),
                vec![HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
                vec![Ty::S, Ty::V(D::N)],
                e1.b.max(e2.b),
                false,
            )
        }
        // A derivative of an earlier scalar helper: `@grad`,
        // `@value_and_grad` or `@jvp`.
        _ => {
            let srcs: Vec<&Helper> = earlier
                .iter()
                .filter(|h| {
                    !h.has_loop
                        && !h.kernel
                        && h.rets == vec![Ty::S]
                        && h.params.len() == 2
                        && matches!(h.params[1], HParam::Dyn(Ty::S))
                        && matches!(h.params[0], HParam::Dyn(Ty::S | Ty::V(D::N)))
                })
                .collect();
            if srcs.is_empty() {
                return None;
            }
            let src = srcs[g.rng.below(srcs.len())];
            src_prim = src.prim;
            let (sizes, p0) = match src.params[0] {
                HParam::Dyn(Ty::V(D::N)) => ("[N]", ("v", Ty::V(D::N), "f64[N]")),
                _ => ("", ("a", Ty::S, "f64")),
            };
            let p1 = if p0.0 == "a" { "c" } else { "a" };
            let head = format!("{name}{sizes}({}: {}, {p1}: f64", p0.0, p0.2);
            let call = format!("{}({}, {p1})", src.name, p0.0);
            let mut params = vec![HParam::Dyn(p0.1), HParam::Dyn(Ty::S)];
            let (text, rets) = match g.rng.below(5) {
                0 => (
                    format!("@grad({p1})\nfn {head}) -> f64 = {call}"),
                    vec![Ty::S],
                ),
                1 => (
                    format!("@grad({})\nfn {head}) -> {} = {call}", p0.0, p0.2),
                    vec![p0.1],
                ),
                2 => (
                    format!(
                        "@grad({}, {p1})\nfn {head}) -> ({}, f64) = {call}",
                        p0.0, p0.2
                    ),
                    vec![p0.1, Ty::S],
                ),
                3 => (
                    format!("@value_and_grad({p1})\nfn {head}) -> (f64, f64) = {call}"),
                    vec![Ty::S, Ty::S],
                ),
                _ => {
                    // Forward mode: the tangent is one more parameter.
                    let (t, tt) = if g.rng.chance(0.5) {
                        (p1, ("f64", Ty::S))
                    } else {
                        (p0.0, (p0.2, p0.1))
                    };
                    params.push(HParam::Dyn(tt.1));
                    (
                        format!("@jvp({t})\nfn {head}, d{t}: {}) -> f64 = {call}", tt.0),
                        vec![Ty::S],
                    )
                }
            };
            if src_prim {
                tag(CUSTOM_TAGS[9], &text);
            }
            (text, params, rets, f64::INFINITY, false)
        }
    };
    let (text, params) = match rt_param {
        Some(c) => {
            let mut ps = vec![HParam::RunCount(c)];
            ps.extend(params);
            let open = text.find('(').unwrap();
            let text = format!("{}(n: i64, {}", &text[..open], &text[open + 1..]);
            tag("helper with a run-time count", "(n: i64, ");
            (text, ps)
        }
        None => (text, params),
    };
    let needs_var = text.contains("max/") || text.contains("min/");
    let uses_n1 = kind == 4;
    let has_loop = g.made_loop;
    let (prim, kernel) = (g.made_prim || src_prim, g.made_kernel);
    // Generic over the element type: `f64` becomes `T` (the f32 copy of the
    // program then specializes it to f32); not with noise (`f64`s), nor
    // calling a user primitive (which has no element-type parameter).
    let generic = kind <= 5
        && rng.chance(0.3)
        && !text.contains("= normal[")
        && !text.contains("= uniform[")
        && !prim;
    let text = if generic {
        let t = text.replace("f64", "T");
        match t.strip_prefix(&format!("fn {name}[")) {
            Some(rest) => format!("fn {name}[T, {rest}"),
            None => t.replacen(&format!("fn {name}("), &format!("fn {name}[T]("), 1),
        }
    } else {
        text
    };
    Some((
        text,
        Helper {
            name,
            params,
            rets,
            b,
            ts,
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1,
            generic,
            has_loop,
            prim,
            kernel,
            tags: Vec::new(),
        },
    ))
}

/// A helper that calls itself through a static value:
/// `fn hK[N](static k: i64, v: f64[N], a: f64) -> T =
/// if k == 0 { base } else { let r = hK(k - 1, v', a'); step }`, where
/// `step` reads `r` (and `k` is sometimes a number in `base` and `step`).
/// The loss calls it with a literal depth from 1 to 4.
fn gen_rec_helper(rng: &mut Rng, k: usize, earlier: &[Helper], cat: bool) -> (String, Helper) {
    let name = format!("h{k}");
    let mut g = Gen::new(rng, 1, "K");
    // (Not the helpers that run a loop: each level of the recursion would
    // run it again.)
    g.helpers = earlier.iter().filter(|h| !h.has_loop).cloned().collect();
    g.fresh = 100 * k;
    g.cat = cat;
    let depth = g.rng.range(1, max_depth()) as u32;
    let ret = if g.rng.chance(0.5) {
        Ty::S
    } else {
        Ty::V(D::N)
    };
    if g.rng.chance(0.5) {
        // The depth as a number (a static `i64` meeting `f64`s).
        let ke = Ex {
            s: "k".into(),
            b: 4.0,
            var: false,
            tab: false,
            ts: true,
            k: true,
        };
        g.push_var("k", &ke, Ty::S);
    }
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        g.push_var(nm, &Ex::leaf(nm, LIMIT, t.is_array()), t);
    }
    let base = g.gen(ret, depth);
    let base = g.bounded(base);
    // The arguments of the recursive call: the parameters, or values of them.
    let mut parts = vec![base.clone()];
    let mut call_args = Vec::new();
    for (nm, t) in [("v", Ty::V(D::N)), ("a", Ty::S)] {
        if g.rng.chance(0.6) {
            call_args.push(nm.to_string());
        } else {
            let e = g.gen(t, 1);
            let e = g.bounded(e);
            call_args.push(e.s.clone());
            parts.push(e);
        }
    }
    let r = g.fresh("r");
    let mark = g.env.len();
    g.push_var(&r, &Ex::leaf(r.clone(), LIMIT, false), ret);
    let mut step = g.gen(ret, depth);
    if !g.env[mark].used {
        step = Ex::of(
            format!("({} + {r} * 0.5)", step.s),
            step.b + LIMIT * 0.5,
            false,
            &[&step],
        );
    }
    g.env.truncate(mark);
    let step = g.bounded(step);
    parts.push(step.clone());
    let stop = g.rng.pick(&["k == 0", "k <= 0", "k < 1", "0 == k"]);
    if [&base.s, &step.s]
        .iter()
        .any(|s| s.contains("max/") || s.contains("min/"))
    {
        // `max/` of a generated vector could tie: pass `v` itself.
        call_args[0] = "v".into();
    }
    let text = format!(
        "fn {name}[N](static k: i64, v: f64[N], a: f64) -> {} {{\n  if {stop} {{ {} }} else {{\n    let {r} = {name}(k - 1, {})\n    {}\n  }}\n}}",
        g.ty_text(ret),
        base.s,
        call_args.join(", "),
        step.s
    );
    let needs_var = text.contains("max/") || text.contains("min/");
    (
        text,
        Helper {
            name,
            params: vec![HParam::Depth, HParam::Dyn(Ty::V(D::N)), HParam::Dyn(Ty::S)],
            rets: vec![ret],
            b: LIMIT,
            ts: parts.iter().all(|p| p.ts),
            needs_var: needs_var || earlier.iter().any(|h| h.needs_var),
            uses_n1: false,
            generic: false,
            has_loop: g.made_loop,
            prim: g.made_prim,
            kernel: g.made_kernel,
            tags: Vec::new(),
        },
    )
}

// ---------------------------------------------------------------- checking

/// Arguments for `f`: uniform in [-1, 1), `N = n`, `L` the length of the
/// sequences, every other size `m`; the run-time bound `u` from 0 to
/// `U_MAX`; `kind` from -1 to 3, `mode` from 0 to `MODE_MAX`, bools 0 or
/// 1, a seed from 0 to 999, a key of two words below 2^32.
fn inputs(f: &Function, gp: &Generated, rng: &mut Rng) -> Vec<Value> {
    let (n, m) = (gp.n, gp.m);
    f.params
        .iter()
        .map(|p| {
            let t = f.ty(p.var);
            // The parameters of `match` and of random numbers, by name.
            let draw: Option<fn(&mut Rng) -> f64> = match (t.dtype, f.var_name(p.var)) {
                (DType::Bool, _) => Some(|r| r.below(2) as f64),
                (DType::I64, "kind") => Some(|r| r.pick(&KIND_VALUES) as f64),
                (DType::I64, "mode") => Some(|r| r.below(MODE_MAX + 1) as f64),
                (DType::I64, "seed") => Some(|r| r.below(1000) as f64),
                (DType::I64, "key" | "kk") => Some(|r| (r.next_u64() >> 32) as f64),
                _ => None,
            };
            // A run-time count (see `set_count`), a bound, or an index in range.
            let ints_below = match t.dtype {
                _ if draw.is_some() => None,
                DType::I64 if f.var_name(p.var) == "u" && t.shape.is_empty() => {
                    return Value::scalar(t.dtype, rng.below(U_MAX + 1) as f64);
                }
                DType::I64 => match int_range(f.var_name(p.var)) {
                    Some(r) => Some(if r == D::N { n } else { m }),
                    None => return Value::scalar(t.dtype, 0.0),
                },
                _ => None,
            };
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Lit(k) => *k as usize,
                    Dim::Param(name) if name == "N" => n,
                    Dim::Param(name) if name == "L" => gp.l,
                    Dim::Param(_) => m,
                    Dim::Sub(..) | Dim::Rows(..) | Dim::Expr(..) => {
                        panic!("parameters have plain sizes")
                    }
                })
                .collect();
            let len: usize = shape.iter().product();
            let data = match (ints_below, draw) {
                (_, Some(draw)) => (0..len).map(|_| draw(rng)).collect(),
                (Some(r), _) => (0..len).map(|_| rng.below(r) as f64).collect(),
                (None, _) => (0..len).map(|_| rng.uniform(-1.0, 1.0)).collect(),
            };
            Value::array(t.dtype, shape, data)
        })
        .collect()
}

/// A value for the extreme-input check: ordinary, signed zeros, large,
/// tiny, infinite or NaN.
fn wild_value(rng: &mut Rng) -> f64 {
    match rng.below(12) {
        0 => 0.0,
        1 => -0.0,
        2 => rng.pick(&[1e300, -1e300, 1e30, -700.0, 710.0]),
        3 => rng.pick(&[1e-300, -1e-310, 5e-324]),
        4 => f64::INFINITY,
        5 => f64::NEG_INFINITY,
        6 => f64::NAN,
        7 => rng.uniform(-50.0, 50.0),
        _ => rng.uniform(-2.0, 2.0),
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    (a - b).abs() <= rel * 1f64.max(a.abs()).max(b.abs())
}

/// How close `args` are to a kink of `f` (comparisons, `max`, `min`,
/// `abs`, ties of `max/` and `min/`, also in each step of its loops),
/// relative to the values compared; `+inf` if there are none.
fn kink_margin(f: &Function, args: &[Value]) -> f64 {
    kink(f, args).0
}

/// The margin of `kink_margin` and the statement that has it.
fn kink(f: &Function, args: &[Value]) -> (f64, String) {
    // The sizes, for the loops' bodies.
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for (p, a) in f.params.iter().zip(args) {
        if f.ty(p.var).dtype == DType::I64 {
            // A run-time count: the size of its name.
            sizes.push((f.var_name(p.var).to_string(), a.data[0] as usize));
        }
        for (d, &len) in f.ty(p.var).shape.iter().zip(&a.shape) {
            if let Dim::Param(name) = d {
                sizes.push((name.clone(), len));
            }
        }
    }
    let (margin, at, _) = kink_in(f, &all_values(f), args, &sizes, false);
    (margin, at)
}

/// The extent of `d` at the sizes `sizes` (0 if unbound).
fn extent(d: &Dim, sizes: &[(String, usize)]) -> u64 {
    let size = |n: &str| sizes.iter().find(|(m, _)| m == n).map(|x| x.1 as u64);
    d.extent(&size).unwrap_or(0)
}

/// `f` at the sizes `sizes`: every size in its types (and its loops')
/// made a literal, so that `run` can call a loop's body on its own (its
/// state may have a size such as `N-1`, and sizes come from its caller).
fn at_sizes(f: &Function, sizes: &[(String, usize)]) -> Function {
    let mut g = f.clone();
    for v in &mut g.vars {
        for d in &mut v.ty.shape {
            *d = Dim::Lit(extent(d, sizes));
        }
    }
    for l in &mut g.loops {
        l.count = Dim::Lit(extent(&l.count, sizes));
        l.body = at_sizes(&l.body, sizes);
        l.vjp = l.vjp.as_ref().map(|v| at_sizes(v, sizes));
    }
    g.size_params.clear();
    g
}

/// `f` returning the value of every statement, then its results.
fn all_values(f: &Function) -> Function {
    let mut g = f.clone();
    g.rets = f.stmts.iter().map(|s| s.var).collect();
    g.rets.extend(f.rets.iter().copied());
    g
}

/// Inside a loop a margin counts this many times more: a state that crosses
/// a comparison along its steps comes as close to it as one step moves it
/// (~1e-3), and the finite differences (h = 1e-6) only need it much
/// further than h. Exact ties broken by rounding are still caught.
const LOOP_MARGIN: f64 = 100.0;

/// `kink` of `f` at `args` (`all` is `all_values(f)`), walking every step
/// of every loop (inside a loop when `in_loop`); also `f`'s results.
fn kink_in(
    f: &Function,
    all: &Function,
    args: &[Value],
    sizes: &[(String, usize)],
    in_loop: bool,
) -> (f64, String, Option<Vec<Value>>) {
    let refs: Vec<&Value> = args.iter().collect();
    let mut vals = match run(all, &refs) {
        Ok(vals) => vals,
        Err(e) => return (0.0, format!("the interpreter failed: {e:?}"), None),
    };
    let results = vals.split_off(f.stmts.len());
    let scale = if in_loop { LOOP_MARGIN } else { 1.0 };
    let mut value: Vec<Option<&Value>> = vec![None; f.vars.len()];
    for (p, a) in f.params.iter().zip(args) {
        value[p.var.index()] = Some(a);
    }
    for (s, v) in f.stmts.iter().zip(&vals) {
        value[s.var.index()] = Some(v);
    }
    // Masks (0/1 values of comparisons and their combinations) and constants.
    let mut mask = vec![false; f.vars.len()];
    let mut konst = vec![false; f.vars.len()];
    // Values that depend on no float parameter (on integers, bools and
    // constants only, such as numbers drawn from a key): finite
    // differences do not move them, so their comparisons are no kinks.
    let mut fixed = vec![false; f.vars.len()];
    for p in &f.params {
        fixed[p.var.index()] = !matches!(f.ty(p.var).dtype, DType::F32 | DType::F64);
    }
    let mut margin = f64::INFINITY;
    let mut at = String::new();
    let rel = |a: f64, b: f64| (a - b).abs() / (1.0 + a.abs() + b.abs());
    for s in &f.stmts {
        let before = margin;
        let args_mask = s.args.iter().any(|a| mask[a.index()])
            && s.args.iter().all(|a| mask[a.index()] || konst[a.index()]);
        let is_cmp = matches!(s.op, Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne);
        let fixed_args = s.args.iter().all(|a| fixed[a.index()]);
        fixed[s.var.index()] = fixed_args;
        match s.op {
            Op::Const(_) | Op::Zero => konst[s.var.index()] = true,
            Op::Bcast if konst[s.args[0].index()] => konst[s.var.index()] = true,
            _ => {}
        }
        let sel_mask = matches!(s.op, Op::Select)
            && s.args[1..]
                .iter()
                .all(|a| mask[a.index()] || konst[a.index()]);
        if is_cmp || (args_mask && !matches!(s.op, Op::Select)) || sel_mask {
            mask[s.var.index()] = true;
        }
        if let Op::Loop(l, _) | Op::LoopTape(l, _, _) = s.op {
            // Each step, from the state the loop starts with (also of a
            // loop run for its tape, as `scan_all` is).
            let lp = &f.loops[l as usize];
            let body = at_sizes(&lp.body, sizes);
            let all = all_values(&body);
            let Some(mut state) = value[s.args[0].index()].cloned() else {
                continue;
            };
            // A scan's step `t` also reads row `t` of its sequence (the last
            // operand).
            let seq = lp
                .is_scan()
                .then(|| value[s.args[s.args.len() - 1].index()])
                .flatten();
            for step in 0..extent(&lp.count, sizes) {
                let mut step_args = vec![state];
                if let Some(xs) = seq {
                    let shape = xs.shape[1..].to_vec();
                    let w: usize = shape.iter().product();
                    let t = step as usize;
                    let data = xs.data[t * w..(t + 1) * w].to_vec();
                    step_args.push(Value::array(xs.dtype, shape, data));
                }
                let (m, a, next) = kink_in(&body, &all, &step_args, sizes, true);
                if m < margin {
                    margin = m;
                    at = format!("step {step} of loop {l}: {a}");
                }
                match next {
                    Some(mut next) => state = next.swap_remove(0),
                    None => break,
                }
            }
            continue;
        }
        if args_mask || s.args.iter().any(|a| mask[a.index()]) {
            continue;
        }
        let arg = |k: usize| value[s.args[k].index()].map(|v| &v.data[..]).unwrap_or(&[]);
        // Integers carry no derivative: their comparisons, `max`, `min`
        // and `abs` are no kinks.
        let int_args = s.args.first().is_some_and(|a| f.ty(*a).dtype == DType::I64);
        match s.op {
            _ if int_args || fixed_args => {}
            // A float truncated to an integer (`i64(e)`) jumps where `e`
            // crosses a nonzero integer.
            Op::Convert(DType::I64) => {
                for a in arg(0) {
                    let r = a.round();
                    if r != 0.0 {
                        margin = margin.min(scale * (a - r).abs() / (1.0 + a.abs()));
                    }
                }
            }
            // An exact tie here is structural (`a <= a`, `max(a, a)`,
            // `abs(a - a)`): the same on both sides of the kink, so
            // differentiable; only near misses are kinks.
            Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Max | Op::Min => {
                for (a, b) in arg(0).iter().zip(arg(1)) {
                    if a != b {
                        margin = margin.min(scale * rel(*a, *b));
                    }
                }
            }
            Op::Abs => {
                for a in arg(0) {
                    if *a != 0.0 {
                        margin = margin.min(scale * a.abs());
                    }
                }
            }
            Op::MaxTail | Op::MinTail => {
                // Each row as `maxall`/`minall` (the result has one element a row).
                let xs = arg(0);
                let rows = value[s.var.index()].map_or(0, |v| v.data.len());
                if rows > 0 && xs.len() % rows == 0 && xs.len() / rows >= 2 {
                    for row in xs.chunks(xs.len() / rows) {
                        let mut r = row.to_vec();
                        r.sort_by(|a, b| a.total_cmp(b));
                        let (a, b) = if s.op == Op::MaxTail {
                            (r[r.len() - 1], r[r.len() - 2])
                        } else {
                            (r[0], r[1])
                        };
                        margin = margin.min(scale * rel(a, b));
                    }
                }
            }
            Op::MaxAll | Op::MinAll => {
                let mut xs: Vec<f64> = arg(0).to_vec();
                if xs.len() >= 2 {
                    xs.sort_by(|a, b| a.total_cmp(b));
                    let (a, b) = if s.op == Op::MaxAll {
                        (xs[xs.len() - 1], xs[xs.len() - 2])
                    } else {
                        (xs[0], xs[1])
                    };
                    margin = margin.min(scale * rel(a, b));
                }
            }
            _ => {}
        }
        if margin < before {
            at = format!(
                "%{} = {} {:?}",
                f.var_name(s.var),
                s.op.name(),
                s.args.iter().map(|a| f.var_name(*a)).collect::<Vec<_>>()
            );
        }
    }
    (margin, at, Some(results))
}

/// How finite differences evaluate a function (output 0, a scalar): by
/// the interpreter, or (the loss of a program with loops, which the
/// interpreter runs step by step) by the JIT, which step 1 found
/// bit-identical to it.
enum Eval<'f> {
    Interp(&'f Function),
    Jit(Box<backend::CompiledFunction>),
}

impl Eval<'_> {
    fn at(&self, args: &[Value]) -> f64 {
        let refs: Vec<&Value> = args.iter().collect();
        match self {
            Eval::Interp(f) => run(f, &refs).unwrap()[0].as_scalar(),
            Eval::Jit(native) => native.call(&refs).unwrap()[0].as_scalar(),
        }
    }
}

/// Central differences of `f` in element `k` of argument `i`.
fn central(f: &Eval, args: &[Value], i: usize, k: usize, h: f64) -> f64 {
    let eval = |a: &[Value]| f.at(a);
    let x = args[i].data[k];
    let mut plus = args.to_vec();
    plus[i].data[k] = x + h;
    let mut minus = args.to_vec();
    minus[i].data[k] = x - h;
    (eval(&plus) - eval(&minus)) / (2.0 * h)
}

#[derive(Default, Debug, Clone)]
struct Stats {
    programs: usize,
    functions: usize,
    grad_checks: usize,
    grad_elems: usize,
    d2_checks: usize,
    skip_kink: usize,
    skip_fd: usize,
    skip_d2: usize,
    resampled: usize,
    vg_checks: usize,
    jvp_checks: usize,
    skip_jvp: usize,
    hvp_checks: usize,
    f32_functions: usize,
    opt_not_bitwise: usize,
    /// Runs of a function optimized with fast math, compared with strict.
    fast_math_runs: usize,
    /// Third derivatives against finite differences: `d3` (of `d2`) and
    /// `t3` (of `hv`), and those skipped (not smooth there).
    d3_checks: usize,
    t3_checks: usize,
    skip_d3: usize,
    /// Programs whose loss runs a loop (`loop` statements in its IR).
    loop_programs: usize,
    /// `loop` statements in the losses' IR (loop bodies included).
    loops: usize,
    /// Programs whose loss runs a loop inside a loop's body.
    nested_loop_programs: usize,
    /// Programs with a loop in a helper's own IR.
    helper_loop_programs: usize,
    /// Second derivatives (`d2`) and Hessian-vector products (`hv`) left
    /// out because they would differentiate a gradient through a loop.
    skip_d2_loop: usize,
    skip_hv_loop: usize,
    /// `d1` against finite differences in those programs.
    d1_loop_checks: usize,
    /// Programs whose loss runs a loop with a run-time count, those loops,
    /// programs with one in a helper's own IR.
    rt_programs: usize,
    rt_loops: usize,
    rt_helper_programs: usize,
    /// Derivative checks at the other run-time counts (checked and skipped).
    rt_checks: usize,
    rt_skips: usize,
    /// Programs whose loss runs a `scan` (a loop over a sequence), and
    /// those scans.
    scan_programs: usize,
    scans: usize,
    /// Programs whose derivatives were left out (a scan in a loop's step).
    skip_scan_in_loop: usize,
    /// Programs whose loss runs a `scan_all` (a scan loop run for its
    /// tape), and those loops.
    scan_all_programs: usize,
    scan_alls: usize,
    /// Programs whose loss runs a loop bounded by the run-time `u`.
    until_programs: usize,
    /// Gradient checks (`dloss` against finite differences, not skipped)
    /// with respect to a sequence of length `L`, and the elements of the
    /// sequences compared.
    seq_grad_checks: usize,
    seq_grad_elems: usize,
    /// Those with an empty sequence (`L = 0`).
    seq_grad_empty: usize,
    /// Programs calling a native kernel: their f32 copy not checked, their
    /// `d2` and `hv` left out (`d1` still checked, in `d1_loop_checks`).
    skip_f32_kernel: usize,
    skip_d2_kernel: usize,
    skip_hv_kernel: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.programs += 1;
        self.functions += o.functions;
        self.grad_checks += o.grad_checks;
        self.grad_elems += o.grad_elems;
        self.d2_checks += o.d2_checks;
        self.skip_kink += o.skip_kink;
        self.skip_fd += o.skip_fd;
        self.skip_d2 += o.skip_d2;
        self.resampled += o.resampled;
        self.vg_checks += o.vg_checks;
        self.jvp_checks += o.jvp_checks;
        self.skip_jvp += o.skip_jvp;
        self.hvp_checks += o.hvp_checks;
        self.f32_functions += o.f32_functions;
        self.opt_not_bitwise += o.opt_not_bitwise;
        self.fast_math_runs += o.fast_math_runs;
        self.d3_checks += o.d3_checks;
        self.t3_checks += o.t3_checks;
        self.skip_d3 += o.skip_d3;
        self.loop_programs += o.loop_programs;
        self.loops += o.loops;
        self.nested_loop_programs += o.nested_loop_programs;
        self.helper_loop_programs += o.helper_loop_programs;
        self.skip_d2_loop += o.skip_d2_loop;
        self.skip_hv_loop += o.skip_hv_loop;
        self.d1_loop_checks += o.d1_loop_checks;
        self.rt_programs += o.rt_programs;
        self.rt_loops += o.rt_loops;
        self.rt_helper_programs += o.rt_helper_programs;
        self.rt_checks += o.rt_checks;
        self.rt_skips += o.rt_skips;
        self.scan_programs += o.scan_programs;
        self.scans += o.scans;
        self.skip_scan_in_loop += o.skip_scan_in_loop;
        self.scan_all_programs += o.scan_all_programs;
        self.scan_alls += o.scan_alls;
        self.until_programs += o.until_programs;
        self.seq_grad_checks += o.seq_grad_checks;
        self.seq_grad_elems += o.seq_grad_elems;
        self.seq_grad_empty += o.seq_grad_empty;
        self.skip_f32_kernel += o.skip_f32_kernel;
        self.skip_d2_kernel += o.skip_d2_kernel;
        self.skip_hv_kernel += o.skip_hv_kernel;
    }
}

/// The counts `scripts/soak.sh` adds up over its chunks, one a line:
/// `SOAK run|skip|fail COUNT WHAT` (checks run, skipped with the reason,
/// failed). Printed before a failure is reported, so a failing chunk is
/// counted too.
fn print_soak_summary(
    stats: &Stats,
    failed: usize,
    jv_seq_left_out: usize,
    jv_kernel: usize,
    refused: &[(String, usize)],
) {
    let run = [
        (stats.programs, "programs checked"),
        (
            stats.functions,
            "functions: JIT = interpreter on the unoptimized and the optimized IR, optimizer = unoptimized (also on extreme inputs)",
        ),
        (
            stats.f32_functions,
            "functions of the f32 variants: JIT = interpreter",
        ),
        (
            stats.fast_math_runs,
            "runs of a function optimized with fast math against strict (1e-9 relative)",
        ),
        (
            stats.grad_checks,
            "gradients (`dloss`) against finite differences",
        ),
        (
            stats.grad_elems,
            "gradient elements compared with finite differences",
        ),
        (stats.vg_checks, "value-and-gradient (`vg`) against the loss and `dloss`"),
        (
            stats.jvp_checks,
            "forward mode (`jv`) against finite differences and reverse mode",
        ),
        (stats.d2_checks, "second derivatives (`d2`) against finite differences of `d1`"),
        (stats.hvp_checks, "Hessian-vector products (`hv`) against `d2`"),
        (stats.d3_checks, "third derivatives (`d3`, reverse three times) against finite differences of `d2`"),
        (stats.t3_checks, "third derivatives (`t3`, reverse over forward over reverse) against finite differences of `hv`"),
        (
            stats.d1_loop_checks,
            "`d1` against finite differences where `d2`/`hv` were left out",
        ),
        (
            stats.rt_checks,
            "derivative checks at the run-time counts 0 and 1",
        ),
    ];
    for (n, what) in run {
        println!("SOAK run {n} {what}");
    }
    let mut skip = vec![
        (
            stats.skip_kink,
            "gradient vs finite differences: no inputs away from a kink (structural tie)"
                .to_string(),
        ),
        (
            stats.skip_fd,
            "gradient vs finite differences: not smooth there (steps h and h/10 disagree)"
                .to_string(),
        ),
        (
            stats.skip_d2,
            "second derivative vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_d3,
            "third derivative vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_jvp,
            "forward mode vs finite differences: not smooth there".to_string(),
        ),
        (
            stats.skip_d2_loop,
            "`d2` left out: egrad refused the second derivative (documented limit)".to_string(),
        ),
        (
            stats.skip_hv_loop,
            "`hv` left out: egrad refused the second derivative (documented limit)".to_string(),
        ),
        (
            stats.rt_skips,
            "derivative checks at run-time counts 0 and 1: not smooth there".to_string(),
        ),
        (
            stats.skip_scan_in_loop,
            "derivative checks left out: a scan in a loop's step (documented limit)".to_string(),
        ),
        (
            jv_seq_left_out,
            "`jv` parameter left out: forward mode w.r.t. a scan's sequence (documented limit)"
                .to_string(),
        ),
        (
            stats.skip_f32_kernel,
            "f32 copy not checked: the program calls a native kernel (kernels take f64 only)"
                .to_string(),
        ),
        (
            jv_kernel,
            "`jv` left out: the program calls a native kernel (no forward mode)".to_string(),
        ),
        (
            stats.skip_d2_kernel,
            "`d2` left out: the program calls a native kernel (no second derivative)".to_string(),
        ),
        (
            stats.skip_hv_kernel,
            "`hv` left out: the program calls a native kernel (no second derivative)".to_string(),
        ),
    ];
    for (r, c) in refused {
        skip.push((*c, format!("function left out, egrad refused it: {r}")));
    }
    for (n, what) in skip {
        println!("SOAK skip {n} {}", what.replace('\n', " "));
    }
    println!("SOAK fail {failed} programs failed (JIT/interpreter/optimizer mismatch, wrong derivative, panic or error)");
}

/// What went wrong with a program.
struct Failure(String);

/// FD vs AD for element k of argument i: Ok(true) if compared, Ok(false) if
/// skipped (the two steps disagree: not smooth there).
fn fd_compare(
    primal: &Eval,
    args: &[Value],
    i: usize,
    k: usize,
    ad: f64,
    what: &str,
) -> Result<bool, Failure> {
    let x = args[i].data[k];
    let h = 1e-6 * x.abs().max(1.0);
    let fd = central(primal, args, i, k, h);
    let fd2 = central(primal, args, i, k, h / 10.0);
    if !fd.is_finite() || (fd - fd2).abs() > 1e-3 * (1.0 + fd.abs()) {
        return Ok(false);
    }
    let tol = 1e-5 * (1.0 + fd.abs());
    if (ad - fd).abs() <= tol {
        Ok(true)
    } else {
        Err(Failure(format!(
            "{what}: argument {i} element {k}: AD {ad:e} vs finite differences {fd:e} (h/10: {fd2:e})"
        )))
    }
}

/// `loop` statements of `f` and of its loops' bodies.
fn loop_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(_, false)))
        .count()
        + f.loops.iter().map(|l| loop_stmts(&l.body)).sum::<usize>()
}

/// `looptape` statements of scans (a `scan_all`) of `f` and of its loops'
/// bodies.
fn scan_all_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::LoopTape(_, _, true)))
        .count()
        + f.loops
            .iter()
            .map(|l| scan_all_stmts(&l.body))
            .sum::<usize>()
}

/// Loops of `f` (and of its loops' bodies) whose count is the size `name`.
fn loops_counted_by(f: &Function, name: &str) -> usize {
    f.loops
        .iter()
        .map(|l| {
            usize::from(matches!(&l.count, Dim::Param(p) if p == name))
                + loops_counted_by(&l.body, name)
        })
        .sum()
}

/// `scan` statements (loops over a sequence) of `f` and of its loops' bodies.
fn scan_stmts(f: &Function) -> usize {
    f.stmts
        .iter()
        .filter(|s| matches!(s.op, Op::Loop(_, true)))
        .count()
        + f.loops.iter().map(|l| scan_stmts(&l.body)).sum::<usize>()
}

fn check_program(gp: &Generated, seed: u64, stats: &mut Stats) -> Result<(), Failure> {
    let p = Program::parse(&gp.source)
        .map_err(|e| Failure(format!("the program does not check:\n{e}")))?;
    let mut rng = Rng(mix(seed ^ 0xA5A5));
    let loss = p.ir("loss").map_err(|e| Failure(e.to_string()))?;
    // 0. The long iterates are loops, not unrolled steps.
    let mut loops = Vec::new();
    for name in p.function_names() {
        if let Ok(f) = p.ir(name) {
            loops_of(f, &mut loops);
            if name.starts_with('h') && loop_stmts(f) > 0 {
                stats.helper_loop_programs = 1;
            }
        }
    }
    for &c in &gp.loop_counts {
        if !loops.iter().any(|&(k, _)| k <= c && c - k <= 3) {
            return Err(Failure(format!(
                "`iterate({c}, ...)` is not a loop in the IR (unrolled); loops: {loops:?}"
            )));
        }
    }
    let in_loss = loop_stmts(loss);
    let scans = scan_stmts(loss);
    if scans > 0 {
        stats.scan_programs = 1;
        stats.scans = scans;
    }
    let scan_alls = scan_all_stmts(loss);
    if scan_alls > 0 {
        stats.scan_all_programs = 1;
        stats.scan_alls = scan_alls;
    }
    stats.until_programs = usize::from(loops_counted_by(loss, "u") > 0);
    if gp.tags.contains(&SEQ_TAGS[2]) && stats.until_programs == 0 {
        return Err(Failure(format!(
            "the loss has an `iterate_until` bounded by `u`, but its IR has no loop counted by `u`:\n{loss}"
        )));
    }
    if in_loss > 0 {
        stats.loop_programs = 1;
        stats.loops = in_loss;
        if loss.loops.iter().any(|l| loop_stmts(&l.body) > 0) {
            stats.nested_loop_programs = 1;
        }
    }
    // A run-time count: the loss's `n` gives a loop's count (where its own
    // text uses `n`), and every check runs at each of the counts, through
    // the same compiled code.
    let rtc = !gp.rt_counts.is_empty();
    let counts: Vec<u64> = if rtc { gp.rt_counts.clone() } else { vec![0] };
    if rtc {
        let rt = runtime_loops(loss);
        if gp.rt_in_loss && rt == 0 {
            return Err(Failure(format!(
                "the loss uses its run-time count `n`, but its IR has no loop with a run-time count:\n{loss}"
            )));
        }
        if rt > 0 {
            stats.rt_programs = 1;
            stats.rt_loops = rt;
        }
        for name in p.function_names() {
            if let Ok(f) = p.ir(name) {
                if name.starts_with('h') && runtime_loops(f) > 0 {
                    stats.rt_helper_programs = 1;
                }
            }
        }
    }
    // Inputs of the loss away from its kinks.
    let (args, clear) = clear_inputs(loss, gp, counts[0], &mut rng, stats);
    let show = show_args;
    // 1. JIT == interpreter (bits) on the unoptimized IR; optimized ~ unoptimized.
    for name in p.function_names() {
        let Ok(f) = p.ir(name) else { continue };
        let mut fargs = if f.param_types() == loss.param_types() {
            args.clone()
        } else {
            inputs(f, gp, &mut rng)
        };
        let compile_ctx = |m: String| Failure(format!("{name}: {m}"));
        let native = backend::compile(f, &BackendOptions::verified())
            .map_err(|e| compile_ctx(format!("compile: {e}")))?;
        let opt = optimize_ir(f, &Options::default())
            .map_err(|e| compile_ctx(format!("optimize: {e}")))?
            .after;
        let native_opt = backend::compile(&opt, &BackendOptions::verified())
            .map_err(|e| compile_ctx(format!("compile optimized: {e}\n{opt}")))?;
        // With the fast-math rules too (`tests/fast_math.rs` states and
        // justifies the bound).
        let opt_fast = optimize_ir(f, &Options::default().fast_math(true))
            .map_err(|e| compile_ctx(format!("optimize with fast math: {e}")))?
            .after;
        for &count in &counts {
            set_count(f, &mut fargs, count);
            let refs: Vec<&Value> = fargs.iter().collect();
            let ctx = |m: String| Failure(format!("{name}: {m}\ninputs:\n  {}", show(&fargs)));
            let want = run(f, &refs).map_err(|e| ctx(format!("interpreter: {e:?}")))?;
            let got = native
                .call(&refs)
                .map_err(|e| ctx(format!("jit call: {e:?}")))?;
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                if !g.bits_eq(w) {
                    return Err(ctx(format!(
                        "result {k}: JIT {:?} vs interpreter {:?} (unoptimized)\n{f}",
                        g.data, w.data
                    )));
                }
            }
            let got_opt = run(&opt, &refs).map_err(|e| ctx(format!("optimized: {e:?}")))?;
            for (k, (g, w)) in got_opt.iter().zip(&want).enumerate() {
                let ok = g.shape == w.shape
                    && g.data.iter().zip(&w.data).all(|(a, b)| close(*a, *b, 1e-9));
                if !ok {
                    return Err(ctx(format!(
                    "result {k}: optimized {:?} vs unoptimized {:?}\nunoptimized:\n{f}\noptimized:\n{opt}",
                    g.data, w.data
                )));
                }
            }
            if got_opt.iter().zip(&want).any(|(g, w)| !g.bits_eq(w)) {
                stats.opt_not_bitwise += 1;
            }
            let got_fast = run(&opt_fast, &refs).map_err(|e| ctx(format!("fast math: {e:?}")))?;
            for (k, (g, w)) in got_fast.iter().zip(&want).enumerate() {
                let ok = g.shape == w.shape
                    && g.data
                        .iter()
                        .zip(&w.data)
                        .all(|(a, b)| !b.is_finite() || close(*a, *b, 1e-9));
                if !ok {
                    return Err(ctx(format!(
                        "result {k}: fast math {:?} vs strict {:?}\nstrict:\n{f}\nfast math:\n{opt_fast}",
                        g.data, w.data
                    )));
                }
            }
            stats.fast_math_runs += 1;
            let got = native_opt
                .call(&refs)
                .map_err(|e| ctx(format!("jit call optimized: {e:?}")))?;
            for (k, (g, w)) in got.iter().zip(&got_opt).enumerate() {
                if !g.bits_eq(w) {
                    return Err(ctx(format!(
                        "result {k}: JIT {:?} vs interpreter {:?} (optimized)\n{opt}",
                        g.data, w.data
                    )));
                }
            }
            // Extreme inputs (signed zeros, huge, tiny, infinities, NaN): only
            // the JIT against the interpreter, bit for bit, on both programs.
            let wild: Vec<Value> = fargs
                .iter()
                .map(|a| {
                    if matches!(a.dtype, DType::I64 | DType::Bool) {
                        return a.clone();
                    }
                    let data = a.data.iter().map(|_| wild_value(&mut rng)).collect();
                    Value::array(a.dtype, a.shape.clone(), data)
                })
                .collect();
            let wrefs: Vec<&Value> = wild.iter().collect();
            for (which, f, native) in [
                ("unoptimized", f, &native),
                ("optimized", &opt, &native_opt),
            ] {
                let want = run(f, &wrefs).map_err(|e| ctx(format!("interpreter: {e:?}")))?;
                let got = native
                    .call(&wrefs)
                    .map_err(|e| ctx(format!("jit call: {e:?}")))?;
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    if !g.bits_eq(w) {
                        return Err(ctx(format!(
                        "result {k}: JIT {:?} vs interpreter {:?} ({which}) on extreme inputs\n{}\n{f}",
                        g.data,
                        w.data,
                        show(&wild)
                    )));
                    }
                }
            }
        }
        stats.functions += 1;
    }
    // The same program in f32: JIT == interpreter bit for bit (unoptimized
    // and optimized; f32 has no finite-difference or optimizer tolerance).
    // (Not a program calling a native kernel: kernels take `f64`s.)
    if gp.kernel_used {
        stats.skip_f32_kernel = 1;
    } else {
        let src32 = to_f32(&gp.source);
        let p32 = Program::parse(&src32)
            .map_err(|e| Failure(format!("the f32 variant does not check:\n{e}")))?;
        for name in p32.function_names() {
            let Ok(f) = p32.ir(name) else { continue };
            let mut fargs = inputs(f, gp, &mut rng);
            let compile_ctx =
                |m: String| Failure(format!("{name} (the program with f32 for f64): {m}"));
            let opt = optimize_ir(f, &Options::default())
                .map_err(|e| compile_ctx(format!("optimize: {e}")))?
                .after;
            let natives = [
                backend::compile(f, &BackendOptions::verified())
                    .map_err(|e| compile_ctx(format!("compile: {e}")))?,
                backend::compile(&opt, &BackendOptions::verified())
                    .map_err(|e| compile_ctx(format!("compile optimized: {e}")))?,
            ];
            for &count in &counts {
                set_count(f, &mut fargs, count);
                let refs: Vec<&Value> = fargs.iter().collect();
                let ctx = |m: String| {
                    Failure(format!(
                        "{name} (the program with f32 for f64): {m}\ninputs:\n  {}",
                        show(&fargs)
                    ))
                };
                for ((which, f), native) in [("unoptimized", f), ("optimized", &opt)]
                    .into_iter()
                    .zip(&natives)
                {
                    let want = run(f, &refs).map_err(|e| ctx(format!("interpreter: {e:?}")))?;
                    let got = native
                        .call(&refs)
                        .map_err(|e| ctx(format!("jit call: {e:?}")))?;
                    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                        if !g.bits_eq(w) {
                            return Err(ctx(format!(
                                "result {k}: JIT {:?} vs interpreter {:?} ({which})\n{f}",
                                g.data, w.data
                            )));
                        }
                    }
                }
            }
            stats.f32_functions += 1;
        }
    }
    if gp.deriv_dropped {
        // egrad rejects the derivatives (see `generate_with`): checks 2 and
        // 3 are skipped, and counted.
        stats.skip_scan_in_loop = 1;
        return Ok(());
    }
    // The loss for finite differences: the JIT where it runs loops.
    let loss_eval = if in_loss > 0 || scans > 0 || scan_alls > 0 || rtc {
        let native = backend::compile(loss, &BackendOptions::default())
            .map_err(|e| Failure(e.to_string()))?;
        Eval::Jit(Box::new(native))
    } else {
        Eval::Interp(loss)
    };
    // 2. and 3. at each count (the other counts' checks counted apart).
    let mut extra = Stats::default();
    for (ci, &count) in counts.iter().enumerate() {
        let (args, clear) = if ci == 0 {
            (args.clone(), clear)
        } else {
            clear_inputs(loss, gp, count, &mut rng, &mut extra)
        };
        let st = if ci == 0 { &mut *stats } else { &mut extra };
        check_derivatives(gp, &p, loss, &loss_eval, args, clear, seed, &mut rng, st).map_err(
            |f| {
                if rtc {
                    Failure(format!("at the run-time count n = {count}: {}", f.0))
                } else {
                    f
                }
            },
        )?;
    }
    stats.rt_checks += extra.grad_checks
        + extra.d2_checks
        + extra.vg_checks
        + extra.jvp_checks
        + extra.hvp_checks
        + extra.d1_loop_checks;
    stats.rt_skips += extra.skip_kink + extra.skip_fd + extra.skip_d2 + extra.skip_jvp;
    Ok(())
}

/// Inputs of `loss` at the run-time count `count` away from its kinks, and
/// whether they are (else the last tried).
fn clear_inputs(
    loss: &Function,
    gp: &Generated,
    count: u64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> (Vec<Value>, bool) {
    let delta = 1e-3;
    let mut args = inputs(loss, gp, rng);
    set_count(loss, &mut args, count);
    for attempt in 0..60 {
        if kink_margin(loss, &args) >= delta {
            if attempt > 0 {
                stats.resampled += 1;
            }
            return (args, true);
        }
        args = inputs(loss, gp, rng);
        set_count(loss, &mut args, count);
    }
    (args, false)
}

fn show_args(args: &[Value]) -> String {
    args.iter()
        .map(|a| format!("{:?} {:?}", a.shape, a.data))
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Give the run-time count `n` of `f` the value `count`.
fn set_count(f: &Function, args: &mut [Value], count: u64) {
    for (p, a) in f.params.iter().zip(args.iter_mut()) {
        if f.ty(p.var).dtype == DType::I64 && f.var_name(p.var) == "n" {
            *a = Value::scalar(DType::I64, count as f64);
        }
    }
}

/// Loops of `f` (and of its loops' bodies) with a run-time count.
fn runtime_loops(f: &Function) -> usize {
    f.loops
        .iter()
        .map(|l| usize::from(!matches!(l.count, Dim::Lit(_))) + runtime_loops(&l.body))
        .sum()
}

/// Checks 2 and 3 (derivatives) of the loss at `args`.
#[allow(clippy::too_many_arguments)]
fn check_derivatives(
    gp: &Generated,
    p: &Program,
    loss: &Function,
    loss_eval: &Eval,
    args: Vec<Value>,
    clear: bool,
    seed: u64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> Result<(), Failure> {
    let show = show_args;
    if !clear {
        if std::env::var("EGRAD_RANDOM_VERBOSE").is_ok() {
            println!("SKIP {seed:#x}: at a kink: {:?}", kink(loss, &args));
        }
        stats.skip_kink += 1;
        return Ok(());
    }
    let refs: Vec<&Value> = args.iter().collect();
    let ctx = |m: String| Failure(format!("{m}\ninputs:\n  {}", show(&args)));
    let lv = run(loss, &refs).unwrap()[0].as_scalar();
    if !lv.is_finite() {
        return Err(ctx(format!("the loss is not finite: {lv}")));
    }
    // 2. The gradient against finite differences of the loss.
    let dloss = p.ir("dloss").map_err(|e| Failure(e.to_string()))?;
    let grads = run(dloss, &refs).map_err(|e| ctx(format!("dloss: {e:?}")))?;
    if grads.len() != gp.wrt.len() {
        return Err(ctx(format!(
            "dloss returns {} values for {} parameters",
            grads.len(),
            gp.wrt.len()
        )));
    }
    let mut skipped = false;
    let mut seq_elems = 0;
    for (g, &i) in grads.iter().zip(&gp.wrt) {
        if g.shape != args[i].shape {
            return Err(ctx(format!(
                "gradient of parameter {i} has shape {:?}, the parameter {:?}",
                g.shape, args[i].shape
            )));
        }
        for k in 0..g.len() {
            if fd_compare(loss_eval, &args, i, k, g.data[k], "dloss").map_err(|f| ctx(f.0))? {
                stats.grad_elems += 1;
                if gp.seq_params.contains(&i) {
                    seq_elems += 1;
                }
            } else {
                skipped = true;
            }
        }
    }
    if skipped {
        stats.skip_fd += 1;
    } else {
        stats.grad_checks += 1;
        if gp.wrt.iter().any(|i| gp.seq_params.contains(i)) {
            stats.seq_grad_checks += 1;
            stats.seq_grad_elems += seq_elems;
            stats.seq_grad_empty += usize::from(gp.l == 0);
        }
    }
    // @value_and_grad: the value and dloss's gradients.
    if gp.vg {
        let vg = p.ir("vg").map_err(|e| Failure(e.to_string()))?;
        let out = run(vg, &refs).map_err(|e| ctx(format!("vg: {e:?}")))?;
        let ok = out.len() == grads.len() + 1
            && close(out[0].as_scalar(), lv, 1e-12)
            && out[1..].iter().zip(&grads).all(|(a, b)| {
                a.shape == b.shape
                    && a.data
                        .iter()
                        .zip(&b.data)
                        .all(|(x, y)| close(*x, *y, 1e-12))
            });
        if !ok {
            return Err(ctx(format!(
                "vg {:?} vs loss {lv} and dloss {:?}",
                out.iter().map(|v| &v.data).collect::<Vec<_>>(),
                grads.iter().map(|v| &v.data).collect::<Vec<_>>()
            )));
        }
        stats.vg_checks += 1;
    }
    // @jvp: the directional derivative, against finite differences along the
    // tangents and against the gradient.
    if let Some(jw) = &gp.jv {
        let jv = p.ir("jv").map_err(|e| Failure(e.to_string()))?;
        let tangents: Vec<Value> = jw
            .iter()
            .map(|&i| {
                let a = &args[i];
                let data = a.data.iter().map(|_| rng.uniform(-1.0, 1.0)).collect();
                Value::array(a.dtype, a.shape.clone(), data)
            })
            .collect();
        let mut all = args.clone();
        all.extend(tangents.iter().cloned());
        let all_refs: Vec<&Value> = all.iter().collect();
        let got = run(jv, &all_refs).map_err(|e| ctx(format!("jv: {e:?}")))?[0].as_scalar();
        let along = |h: f64| {
            let shifted = |sign: f64| {
                let mut a = args.clone();
                for (t, &i) in tangents.iter().zip(jw) {
                    for (x, d) in a[i].data.iter_mut().zip(&t.data) {
                        *x += sign * h * d;
                    }
                }
                loss_eval.at(&a)
            };
            (shifted(1.0) - shifted(-1.0)) / (2.0 * h)
        };
        let (fd, fd2) = (along(1e-6), along(1e-7));
        if fd.is_finite() && (fd - fd2).abs() <= 1e-3 * (1.0 + fd.abs()) {
            if (got - fd).abs() > 1e-5 * (1.0 + fd.abs()) {
                return Err(ctx(format!(
                    "jv: forward mode {got:e} vs finite differences along the tangents {fd:e} (h/10: {fd2:e})\ntangents: {}",
                    show(&tangents)
                )));
            }
            stats.jvp_checks += 1;
        } else {
            stats.skip_jvp += 1;
        }
        // Against the gradient, where dloss has every parameter of jv.
        if jw.iter().all(|i| gp.wrt.contains(i)) {
            let mut dot = 0.0;
            let mut scale = 1.0;
            for (t, i) in tangents.iter().zip(jw) {
                let k = gp.wrt.iter().position(|w| w == i).unwrap();
                for (gx, tx) in grads[k].data.iter().zip(&t.data) {
                    dot += gx * tx;
                    scale += (gx * tx).abs();
                }
            }
            if (got - dot).abs() > 1e-9 * scale {
                return Err(ctx(format!(
                    "jv: forward mode {got:e} vs the gradient along the tangents {dot:e}\ntangents: {}",
                    show(&tangents)
                )));
            }
        }
    }
    // 3. The second derivative in s against finite differences of d1.
    if let Some(si) = gp.scalar {
        let d1 = p.ir("d1").map_err(|e| Failure(e.to_string()))?;
        let g1 = run(d1, &refs).map_err(|e| ctx(format!("d1: {e:?}")))?[0].as_scalar();
        let mut ok = fd_compare(loss_eval, &args, si, 0, g1, "d1").map_err(|f| ctx(f.0))?;
        if gp.second_dropped {
            // Through a loop or a native kernel: d1 only (d2 and hv are
            // not in the program).
            if gp.kernel_used {
                stats.skip_d2_kernel += 1;
                stats.skip_hv_kernel += usize::from(gp.hv_dropped);
            } else {
                stats.skip_d2_loop += 1;
                stats.skip_hv_loop += usize::from(gp.hv_dropped);
            }
            stats.d1_loop_checks += usize::from(ok);
            return Ok(());
        }
        let d2 = p.ir("d2").map_err(|e| Failure(e.to_string()))?;
        let g2 = run(d2, &refs).map_err(|e| ctx(format!("d2: {e:?}")))?[0].as_scalar();
        ok &= fd_compare(&Eval::Interp(d1), &args, si, 0, g2, "d2 against d1")
            .map_err(|f| ctx(f.0))?;
        if ok {
            stats.d2_checks += 1;
        } else {
            stats.skip_d2 += 1;
        }
        // Third order: d3 against finite differences of d2.
        if gp.d3 {
            let d3 = p.ir("d3").map_err(|e| Failure(e.to_string()))?;
            let g3 = run(d3, &refs).map_err(|e| ctx(format!("d3: {e:?}")))?[0].as_scalar();
            if fd_compare(&Eval::Interp(d2), &args, si, 0, g3, "d3 against d2")
                .map_err(|f| ctx(f.0))?
            {
                stats.d3_checks += 1;
            } else {
                stats.skip_d3 += 1;
            }
        }
        // Forward over reverse: hv(ds) = d2 * ds.
        if gp.hv {
            let hv = p.ir("hv").map_err(|e| Failure(e.to_string()))?;
            let ds = rng.uniform(-1.0, 1.0);
            let mut all = args.clone();
            all.push(Value::scalar(args[si].dtype, ds));
            let all_refs: Vec<&Value> = all.iter().collect();
            let got = run(hv, &all_refs).map_err(|e| ctx(format!("hv: {e:?}")))?[0].as_scalar();
            if (got - g2 * ds).abs() > 1e-8 * (1.0 + (g2 * ds).abs()) {
                return Err(ctx(format!(
                    "hv: forward over reverse {got:e} vs d2 * ds = {g2:e} * {ds}"
                )));
            }
            stats.hvp_checks += 1;
            // Third order: t3 (reverse over forward over reverse) against
            // finite differences of hv.
            if gp.t3 {
                let t3 = p.ir("t3").map_err(|e| Failure(e.to_string()))?;
                let g3 = run(t3, &all_refs).map_err(|e| ctx(format!("t3: {e:?}")))?[0].as_scalar();
                if fd_compare(&Eval::Interp(hv), &all, si, 0, g3, "t3 against hv")
                    .map_err(|f| ctx(f.0))?
                {
                    stats.t3_checks += 1;
                } else {
                    stats.skip_d3 += 1;
                }
            }
        }
    }
    Ok(())
}

/// What happened to one program.
enum Outcome {
    Passed(Box<Stats>),
    /// A check failed, or egrad (or the generator) panicked.
    Failed(String),
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".into())
}

/// Generate and check the program of `seed`.
fn run_one(seed: u64) -> (Option<Generated>, Outcome) {
    let gp = match std::panic::catch_unwind(|| generate(seed)) {
        Ok(gp) => gp,
        Err(e) => return (None, Outcome::Failed(panic_message(&*e))),
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut st = Stats::default();
        check_program(&gp, seed, &mut st).map(|_| st)
    }));
    let outcome = match r {
        Ok(Ok(st)) => Outcome::Passed(Box::new(st)),
        Ok(Err(Failure(m))) => Outcome::Failed(m),
        Err(e) => Outcome::Failed(format!("panicked: {}", panic_message(&*e))),
    };
    (Some(gp), outcome)
}

/// One more than the largest expression depth (`EGRAD_RANDOM_DEPTH`, to
/// hunt with bigger programs; 4 by default).
fn max_depth() -> usize {
    env_u64("EGRAD_RANDOM_DEPTH").map_or(4, |d| d.max(2) as usize)
}

/// Groups of the run-time integer constructs (tags) counted by program;
/// in a release run at least 5% of the programs must have each of the
/// first three.
const INT_GROUPS: [(&str, &[&str]); 6] = [
    (
        "gathers",
        &[
            "gather x[idx]",
            "gather of matrix rows A[idx]",
            "tabulate over an index array x[idx[i]]",
        ],
    ),
    ("`scatter_add`", &["scatter_add"]),
    ("integer arithmetic", &["integer arithmetic"]),
    (
        "run-time scalar indices",
        &[
            "run-time index x[k]",
            "run-time index of a matrix element A[a, b]",
            "run-time row A[k]",
        ],
    ),
    (
        "conversions",
        &["f64(...) of integers", "i64(...) of a float"],
    ),
    (
        "a helper with an i64 result",
        &["helper with an i64 result"],
    ),
];

#[test]
fn random_programs_jit_optimizer_and_derivatives() {
    register_kernels();
    let start = std::time::Instant::now();
    let base = env_u64("EGRAD_RANDOM_SEED").unwrap_or(0x00E6_4AD5_EED0);
    // 600 programs take about 20 to 30 s on two cores in release (some 1.4
    // times as long as without loops); a debug build is some 25 times slower
    // and runs a sample.
    let default_count = if cfg!(debug_assertions) { 40 } else { 600 };
    let overridden = std::env::var("EGRAD_RANDOM_PROGRAMS").is_ok()
        || std::env::var("EGRAD_RANDOM_PROGRAM_SEED").is_ok()
        || std::env::var("EGRAD_RANDOM_LOOPS").is_ok()
        || std::env::var("EGRAD_RANDOM_NEW").is_ok()
        || std::env::var("EGRAD_RANDOM_INTS").is_ok()
        || std::env::var("EGRAD_RANDOM_SEQ").is_ok()
        || std::env::var("EGRAD_RANDOM_NEST").is_ok()
        || std::env::var("EGRAD_RANDOM_MATCH").is_ok()
        || std::env::var("EGRAD_RANDOM_KEYS").is_ok()
        || std::env::var("EGRAD_RANDOM_CUSTOM").is_ok()
        || std::env::var("EGRAD_RANDOM_KERNELS").is_ok()
        || std::env::var("EGRAD_RANDOM_FIRST").is_ok();
    let count = env_u64("EGRAD_RANDOM_PROGRAMS").unwrap_or(default_count) as usize;
    // The programs of indices `first..first + count` of the base seed's
    // stream: `scripts/soak.sh` runs a long soak as chunks of it.
    let first = env_u64("EGRAD_RANDOM_FIRST").unwrap_or(0);
    let seeds: Vec<u64> = match env_u64("EGRAD_RANDOM_PROGRAM_SEED") {
        Some(s) => vec![s],
        None => (first..first + count as u64)
            .map(|i| mix(mix(base).wrapping_add(i)))
            .collect(),
    };
    let mut stats = Stats::default();
    // Programs drawn with the newer constructs, and how often each is
    // written (`scan(`, `reverse(`, `concat(`, calls of a recursive helper
    // from the other functions).
    let mut novel_programs = 0;
    let mut uses = [0usize; 4];
    // Programs drawn with run-time integers, and the programs having each
    // group of integer constructs (see `INT_GROUPS`).
    let mut int_programs = 0;
    let mut int_groups = [0usize; INT_GROUPS.len()];
    // Programs drawn with the sequence constructs; those with sequences of
    // length `L`, by `L`; those whose `dloss` takes a sequence; the
    // derivative functions left out, by reason.
    let mut seq_programs = 0;
    let mut seq_by_len = [0usize; L_MAX + 1];
    let mut seq_wrt_programs = 0;
    let mut jv_seq_left_out = 0;
    let mut refused: Vec<(String, usize)> = Vec::new();
    // Programs drawn with nested `tabulate`s or indexed stacks; those
    // having a nested `tabulate`, an indexed stack; by tag.
    let mut nest_programs = 0;
    let mut nested_programs = 0;
    let mut stack_programs = 0;
    // Programs drawn with `match`, with random numbers; those whose
    // gradient was checked against finite differences with a run-time
    // `match` in the program, with noise drawn from a key.
    let mut match_programs = 0;
    let mut key_programs = 0;
    let mut match_grad_programs = 0;
    let mut key_grad_programs = 0;
    // Programs drawn with functions with their own derivative rules, and
    // those calling one whose gradient (`dloss`), forward mode (`jv`),
    // second derivative (`d2` or `hv`) were checked; programs drawn with
    // native kernels, those calling one whose gradient was checked, and
    // those whose `jv` was left out for it.
    let mut custom_programs = 0;
    let mut custom_grad_programs = 0;
    let mut custom_jv_programs = 0;
    let mut custom_d2_programs = 0;
    let mut kernel_programs = 0;
    let mut kernel_grad_programs = 0;
    let mut jv_kernel = 0;
    let mut features: Vec<(&str, usize)> = [
        "tabulate[",
        "matmul(",
        "transpose(",
        "iterate(",
        "static n",
        "static c",
        "if ",
        "&&",
        "||",
        "!(",
        "max/",
        "min/",
        "+/",
        "max(",
        "min(",
        "abs(",
        "pow(",
        "log(",
        "sqrt(",
        "exp(",
        "let (",
        "{ let",
        "@grad(s)",
        "fn h",
        "@grad(a",
        "@grad(v",
        "@grad(c",
        "[i",
        "+ 1]",
        "N-1",
        "iterate_until(",
        "@value_and_grad",
        "@jvp(s)",
        "fn jv",
        "[T",
        "generic helper called from the loss",
        "max/ or min/ of a row in tabulate",
        "X[i, k] in tabulate",
        "X[i + c, k] in tabulate",
        "long iterate (a loop)",
        "loop: scalar state",
        "loop: tuple of scalars",
        "loop: vector state",
        "loop: tuple of vectors",
        "loop: reads values from outside",
        "loop: scalar read by a vector state",
        "loop: inside a loop's step",
        "loop: in a helper",
        "loop: run-time count",
        "helper with a run-time count",
        "run-time count passed a literal",
        "scan(",
        "scan (a loop over a sequence)",
        "scan: over a vector",
        "scan: over a matrix",
        "scan: scalar state",
        "scan: vector state",
        "scan: tuple state",
        "scan: reads values from outside",
        "scan: reversed sequence",
        "scan: sequence made by concat",
        "scan: inside a loop's step",
        "scan: unrolled (a state of mixed shapes)",
        "reverse(",
        "reverse",
        "reverse(x)[i] in tabulate",
        "concat(",
        "concat",
        "concat: vectors",
        "concat: rows of matrices",
        "reverse or concat in a loop's step",
        "static k",
        "static recursion (called with a literal depth)",
        ": i64",
        ": i64[",
        "gather x[idx]",
        "gather of matrix rows A[idx]",
        "tabulate over an index array x[idx[i]]",
        "run-time index x[k]",
        "run-time index of a matrix element A[a, b]",
        "run-time row A[k]",
        "scatter_add",
        "scatter_add of matrix rows",
        "integer arithmetic",
        "integer max, min or abs",
        "integer comparison",
        "if on an integer condition",
        "f64(...) of integers",
        "i64(...) of a float",
        "index: an integer % the length",
        "index: an integer clamped to the length",
        "index: i64(...) of a float % the length",
        "index array: integer arithmetic on indices",
        "helper with an i64 result",
        "scan_all(",
        "iterate_until(u, ",
        SEQ_TAGS[0],
        SEQ_TAGS[1],
        SEQ_TAGS[2],
        "sequence: rows are scalars (f64[L])",
        "sequence: rows are vectors (f64[L, B])",
        "sequence: scalar state",
        "sequence: vector state",
        "sequence: tuple state",
        "sequence: the step reads values from outside",
        "sequence: mapped (tanh, sin, reverse, * a value)",
        "sequence: scaled by a value from outside",
        "iterate_until(u, ...): scalar state",
        "iterate_until(u, ...): vector state",
        "iterate_until(u, ...): a threshold on the state",
        "iterate_until(u, ...): a generated condition",
        "iterate_until(u, ...): the step reads values from outside",
    ]
    .iter()
    .chain(NEST_TAGS.iter())
    .chain(STACK_TAGS.iter())
    .chain(MATCH_TAGS.iter())
    .chain(KEY_TAGS.iter())
    .chain(CUSTOM_TAGS.iter())
    .chain(KERNEL_TAGS.iter())
    .map(|f| (*f, 0))
    .collect();
    let print = std::env::var("EGRAD_RANDOM_PRINT").is_ok();
    // Report every failing program (one line each) instead of stopping at the first.
    let keep_going = std::env::var("EGRAD_RANDOM_KEEP_GOING").is_ok();
    let mut failures: Vec<String> = Vec::new();
    // Programs run on a few threads; results are taken in seed order, and
    // without EGRAD_RANDOM_KEEP_GOING the first failing program (in seed
    // order) is reported.
    let next = AtomicUsize::new(0);
    let first_fail = AtomicUsize::new(usize::MAX);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    let mut results: Vec<(usize, Option<Generated>, Outcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= seeds.len()
                            || (!keep_going && i > first_fail.load(Ordering::SeqCst))
                        {
                            break;
                        }
                        let (gp, outcome) = run_one(seeds[i]);
                        if !matches!(outcome, Outcome::Passed(_)) {
                            first_fail.fetch_min(i, Ordering::SeqCst);
                        }
                        out.push((i, gp, outcome));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    results.sort_by_key(|r| r.0);
    for (i, gp, outcome) in results {
        let seed = seeds[i];
        let report = |m: &str| {
            match &gp {
            Some(gp) => format!(
                "random program failed (seed {seed:#x}; rerun alone with EGRAD_RANDOM_PROGRAM_SEED={seed:#x}), N = {}, M = {}:\n{m}\n--- program ---\n{}",
                gp.n, gp.m, gp.source
            ),
            None => format!("generating the program of seed {seed:#x} failed: {m}"),
        }
        };
        if let Some(gp) = &gp {
            if print {
                println!(
                    "--- seed {seed:#x}, N = {}, M = {}\n{}",
                    gp.n, gp.m, gp.source
                );
            }
            for (f, c) in features.iter_mut() {
                if gp.source.contains(*f) || gp.tags.contains(f) {
                    *c += 1;
                }
            }
            novel_programs += usize::from(gp.novel);
            seq_programs += usize::from(gp.seq);
            if !gp.seq_params.is_empty() {
                seq_by_len[gp.l] += 1;
            }
            seq_wrt_programs += usize::from(gp.wrt.iter().any(|i| gp.seq_params.contains(i)));
            jv_seq_left_out += usize::from(gp.jv_seq_left_out);
            let reasons = [
                gp.jv_refused.map(|r| format!("`jv`: {r}")),
                gp.second_refused.map(|r| format!("`d2` and `hv`: {r}")),
                gp.third_refused.map(|r| format!("`d3` or `t3`: {r}")),
            ];
            for r in reasons.into_iter().flatten() {
                match refused.iter_mut().find(|x| x.0 == r) {
                    Some(x) => x.1 += 1,
                    None => refused.push((r, 1)),
                }
            }
            int_programs += usize::from(gp.ints);
            nest_programs += usize::from(gp.nest);
            match_programs += usize::from(gp.matches);
            key_programs += usize::from(gp.keys);
            custom_programs += usize::from(gp.custom);
            kernel_programs += usize::from(gp.kernels);
            jv_kernel += usize::from(gp.jv_kernel);
            nested_programs += usize::from(gp.tags.contains(&NEST_TAGS[0]));
            stack_programs += usize::from(STACK_TAGS.iter().any(|t| gp.tags.contains(t)));
            for (c, (_, tags)) in int_groups.iter_mut().zip(INT_GROUPS) {
                *c += usize::from(tags.iter().any(|t| gp.tags.contains(t)));
            }
            for (k, f) in ["scan(", "reverse(", "concat("].iter().enumerate() {
                uses[k] += gp.source.matches(f).count();
            }
            if let Some(h) = &gp.rec_helper {
                // (Less its own recursive call.)
                uses[3] += gp
                    .source
                    .matches(&format!("{h}("))
                    .count()
                    .saturating_sub(1);
            }
        }
        match outcome {
            Outcome::Passed(st) => {
                if let Some(gp) = &gp {
                    let checked = usize::from(st.grad_checks > 0);
                    if gp.tags.contains(&MATCH_TAGS[0]) {
                        match_grad_programs += checked;
                    }
                    if gp.tags.contains(&KEY_TAGS[0]) {
                        key_grad_programs += checked;
                    }
                    if gp.tags.contains(&CUSTOM_TAGS[0]) {
                        custom_grad_programs += checked;
                        custom_jv_programs += usize::from(st.jvp_checks > 0);
                        custom_d2_programs += usize::from(st.d2_checks + st.hvp_checks > 0);
                    }
                    if gp.tags.contains(&KERNEL_TAGS[0]) {
                        kernel_grad_programs += checked;
                    }
                }
                stats.add(&st)
            }
            Outcome::Failed(m) => {
                let first = m.lines().take(2).collect::<Vec<_>>().join(" | ");
                println!("FAIL {seed:#x}: {first}");
                failures.push(report(&m));
                if !keep_going {
                    break;
                }
            }
        }
    }
    print_soak_summary(&stats, failures.len(), jv_seq_left_out, jv_kernel, &refused);
    if let Some(f) = failures.first() {
        panic!("{} programs failed; the first:\n{f}", failures.len());
    }
    let skips = stats.skip_kink + stats.skip_fd;
    println!(
        "random programs: {} checked in {:.1?} ({} functions through JIT/interpreter/optimizer; {} gradients ({} elements) and {} second derivatives against finite differences; skipped: {} at a structural kink, {} non-smooth gradients, {} non-smooth second derivatives; {} resampled away from kinks)",
        stats.programs,
        start.elapsed(),
        stats.functions,
        stats.grad_checks,
        stats.grad_elems,
        stats.d2_checks,
        stats.skip_kink,
        stats.skip_fd,
        stats.skip_d2,
        stats.resampled,
    );
    println!(
        "also: {} value-and-gradient checks, {} forward-mode checks ({} skipped, non-smooth), {} Hessian-vector products, {} functions of the f32 variants through JIT/interpreter; {} functions whose optimized result is not bit-identical (within tolerance)",
        stats.vg_checks, stats.jvp_checks, stats.skip_jvp, stats.hvp_checks, stats.f32_functions, stats.opt_not_bitwise
    );
    println!(
        "loops: {} of {} programs run loops in the loss ({} loops; {} with a loop inside a loop's step; {} with a loop in a helper's own IR); second derivatives left out (egrad refused them): {} `d2` and {} `hv` (`d1` still checked: {} against finite differences)",
        stats.loop_programs,
        stats.programs,
        stats.loops,
        stats.nested_loop_programs,
        stats.helper_loop_programs,
        stats.skip_d2_loop,
        stats.skip_hv_loop,
        stats.d1_loop_checks,
    );
    println!(
        "run-time counts: {} programs run a loop with a run-time count `n` in the loss ({} such loops; {} with one in a helper's own IR), each checked at 3 counts through the same compiled code; at the other counts {} derivative checks passed, {} skipped",
        stats.rt_programs,
        stats.rt_loops,
        stats.rt_helper_programs,
        stats.rt_checks,
        stats.rt_skips,
    );
    let programs_with = |f: &str| features.iter().find(|x| x.0 == f).map_or(0, |x| x.1);
    println!(
        "newer constructs: {novel_programs} programs drawn with them; `scan` in {} programs ({} written, {} unrolled; {} programs run a scan in the loss's IR, {} scans there; these counts include the scans over sequences of length L below; {} programs scan `xs` or `Xs`), `reverse` in {} ({} written), `concat` in {} ({} written), static recursion in {} ({} calls of the recursive helper)",
        programs_with("scan("),
        uses[0],
        programs_with("scan: unrolled (a state of mixed shapes)"),
        stats.scan_programs,
        stats.scans,
        programs_with("scan (a loop over a sequence)"),
        programs_with("reverse("),
        uses[1],
        programs_with("concat("),
        uses[2],
        programs_with("static recursion (called with a literal depth)"),
        uses[3],
    );
    println!(
        "scans in a loop's step: {} programs; derivative checks skipped in {} of them (a documented limit egrad reported)",
        programs_with("scan: inside a loop's step"),
        stats.skip_scan_in_loop,
    );
    println!(
        "sequences of length L: {seq_programs} programs drawn with them; `scan` over one in {} programs, `scan_all` in {} ({} programs run a `scan_all` loop in the loss's IR, {} such loops), `iterate_until` bounded by the run-time `u` in {} ({} with a loop counted by `u` in the loss's IR); programs with sequences by L = 0..{L_MAX}: {seq_by_len:?}; `dloss` takes a sequence in {seq_wrt_programs} programs, {} of them checked against finite differences ({} elements of sequences; {} with L = 0)",
        programs_with(SEQ_TAGS[0]),
        programs_with(SEQ_TAGS[1]),
        stats.scan_all_programs,
        stats.scan_alls,
        programs_with(SEQ_TAGS[2]),
        stats.until_programs,
        stats.seq_grad_checks,
        stats.seq_grad_elems,
        stats.seq_grad_empty,
    );
    let refused_text: Vec<String> = refused.iter().map(|(r, c)| format!("{c} {r}")).collect();
    println!(
        "forward mode left out: {jv_seq_left_out} programs drew a sequence of length L among `jv`'s parameters and left it out (forward mode with respect to a scan's sequence is not supported); derivative functions egrad refuses (documented limits), left out: {}",
        if refused_text.is_empty() {
            "none".to_string()
        } else {
            refused_text.join(", ")
        }
    );
    let groups: Vec<String> = INT_GROUPS
        .iter()
        .zip(int_groups)
        .map(|((what, _), c)| format!("{what} in {c}"))
        .collect();
    println!(
        "run-time integers: {int_programs} programs drawn with them; {}",
        groups.join(", ")
    );
    let by_tag = |tags: &[&str]| -> String {
        tags.iter()
            .map(|t| {
                format!(
                    "{} {}",
                    programs_with(t),
                    t.split_once(": ").map_or(*t, |x| x.1)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "nested tabulates and indexed stacks: {nest_programs} programs drawn with them; a nested `tabulate` in {nested_programs} ({}), an indexed stack in {stack_programs} ({})",
        by_tag(&NEST_TAGS[1..]),
        by_tag(&STACK_TAGS),
    );
    println!(
        "match: {match_programs} programs drawn with it; a run-time `match` in {} ({} of them with a gradient checked against finite differences), a static one in {}; {}",
        programs_with(MATCH_TAGS[0]),
        match_grad_programs,
        programs_with(MATCH_TAGS[1]),
        by_tag(&MATCH_TAGS[2..]),
    );
    println!(
        "random numbers: {key_programs} programs drawn with them; noise drawn from a key in {} ({} of them with a gradient checked against finite differences); {}",
        programs_with(KEY_TAGS[0]),
        key_grad_programs,
        by_tag(&KEY_TAGS[1..]),
    );
    println!(
        "user primitives: {custom_programs} programs drawn with functions with their own derivative rules; one called in {} ({} of them with a gradient, {} with forward mode, {} with a second derivative checked against finite differences); {}",
        programs_with(CUSTOM_TAGS[0]),
        custom_grad_programs,
        custom_jv_programs,
        custom_d2_programs,
        by_tag(&CUSTOM_TAGS[1..]),
    );
    println!(
        "native kernels: {kernel_programs} programs drawn with them; one called in {} ({} of them with a gradient checked against finite differences; left out for them: {} f32 copies, {} `jv`, {} `d2`, {} `hv`); {}",
        programs_with(KERNEL_TAGS[0]),
        kernel_grad_programs,
        stats.skip_f32_kernel,
        jv_kernel,
        stats.skip_d2_kernel,
        stats.skip_hv_kernel,
        by_tag(&KERNEL_TAGS[1..]),
    );
    let cov: Vec<String> = features.iter().map(|(f, c)| format!("`{f}` {c}")).collect();
    println!("programs using: {}", cov.join(", "));
    assert_eq!(stats.programs, seeds.len(), "every program must be checked");
    if !overridden && !cfg!(debug_assertions) {
        assert!(stats.programs >= 500, "only {} programs", stats.programs);
    }
    let ratio = |skipped: usize, of: usize| skipped as f64 / of.max(1) as f64;
    if !overridden && !cfg!(debug_assertions) {
        assert!(
            ratio(stats.loop_programs, stats.programs) >= 0.1,
            "only {} of {} programs have loops",
            stats.loop_programs,
            stats.programs
        );
    }
    if !overridden && !cfg!(debug_assertions) {
        // The newer constructs are generated (and scans are loops).
        for (what, count) in [
            ("run a scan in the loss", stats.scan_programs),
            (
                "scan `xs` or `Xs` (not counting the sequences of length L)",
                programs_with("scan (a loop over a sequence)"),
            ),
            ("use `reverse`", programs_with("reverse")),
            ("use `concat`", programs_with("concat")),
            (
                "recurse through a static depth",
                programs_with("static recursion (called with a literal depth)"),
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs {what}",
                stats.programs
            );
        }
        // The sequence constructs, and gradients with respect to sequences.
        for (what, count) in [
            ("scan a sequence of length L", programs_with(SEQ_TAGS[0])),
            (
                "`scan_all` a sequence of length L",
                programs_with(SEQ_TAGS[1]),
            ),
            ("run a `scan_all` loop in the loss", stats.scan_all_programs),
            (
                "have an `iterate_until` bounded by `u`",
                programs_with(SEQ_TAGS[2]),
            ),
            (
                "run a loop counted by `u` in the loss",
                stats.until_programs,
            ),
            (
                "check a gradient with respect to a sequence",
                stats.seq_grad_checks,
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.03,
                "only {count} of {} programs {what}",
                stats.programs
            );
        }
        assert!(
            seq_by_len[0] > 0 && stats.seq_grad_empty > 0,
            "no program has an empty sequence (L = 0) with a gradient checked"
        );
        // And the run-time integers.
        for ((what, _), count) in INT_GROUPS.iter().zip(int_groups).take(3) {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
        // And the nested `tabulate`s and indexed stacks; `match` and
        // random numbers.
        for (what, count) in [
            ("a nested `tabulate`", nested_programs),
            ("an indexed stack", stack_programs),
        ] {
            assert!(
                ratio(count, stats.programs) >= 0.05,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
        for (what, count, share) in [
            ("a run-time `match`", programs_with(MATCH_TAGS[0]), 0.03),
            ("a static `match`", programs_with(MATCH_TAGS[1]), 0.02),
            (
                "a gradient checked through a run-time `match`",
                match_grad_programs,
                0.03,
            ),
            ("noise drawn from a key", programs_with(KEY_TAGS[0]), 0.03),
            (
                "a gradient checked with noise drawn from a key",
                key_grad_programs,
                0.03,
            ),
            (
                "a function with its own derivative rules called",
                programs_with(CUSTOM_TAGS[0]),
                0.03,
            ),
            (
                "a gradient checked through a function with its own derivative rules",
                custom_grad_programs,
                0.03,
            ),
            (
                "a second derivative checked through a function with its own derivative rules",
                custom_d2_programs,
                0.01,
            ),
            (
                "a native kernel called",
                programs_with(KERNEL_TAGS[0]),
                0.03,
            ),
            (
                "a gradient checked through a native kernel",
                kernel_grad_programs,
                0.03,
            ),
        ] {
            assert!(
                ratio(count, stats.programs) >= share,
                "only {count} of {} programs have {what}",
                stats.programs
            );
        }
    }
    assert!(
        ratio(skips, stats.programs) < 0.2,
        "{skips} of {} gradient checks skipped",
        stats.programs
    );
    let with_s = stats.d2_checks + stats.skip_d2;
    assert!(
        ratio(stats.skip_d2, with_s) < 0.2,
        "{} of {with_s} second-derivative checks skipped",
        stats.skip_d2
    );
    let with_jv = stats.jvp_checks + stats.skip_jvp;
    assert!(
        ratio(stats.skip_jvp, with_jv) < 0.2,
        "{} of {with_jv} forward-mode checks skipped",
        stats.skip_jvp
    );
}
