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
//! Fixed (issue 36): the language reference says `f32(...)` rounds the
//! numbers drawn from a key, but egrad did not convert `f64` to `f32`
//! ("converting f64 to f32 is not supported yet"), so the f32 copy rounded
//! them through an integer. It now converts them with `f32(z)`.
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
use egrad::internals::ops::{Math, Op};
use egrad::internals::pipeline::{optimize_ir, Options};
use egrad::internals::types::value::Value;
use egrad::internals::types::{DType, Dim};
use egrad::Program;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "random_programs/check_1.rs"]
mod check_1;
#[path = "random_programs/check_2.rs"]
mod check_2;
#[path = "programs/mod.rs"]
mod programs;
#[path = "random_programs/run.rs"]
mod run;

#[allow(unused_imports)]
use {check_1::*, check_2::*, programs::*, run::*};

#[test]
fn random_programs_jit_optimizer_and_derivatives() {
    run::run_all();
}
