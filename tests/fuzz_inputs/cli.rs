//! The command line at its extremes (issue 38): every flag of every
//! subcommand, read from the subcommands' own `-h` at the start (so a new
//! flag is fuzzed without a change here), given values at the edges of
//! what it takes: 0, -1, huge integers, 1e308, 1e400, NaN, infinities,
//! empty and 10 KB strings, bytes that are not UTF-8, paths that are
//! missing, directories or `/dev/full`, sizes and λs past their limits,
//! repeated and unknown flags.
//!
//! Work that is legitimately long is made impossible here rather than
//! excused as a hang: sizes are small (at most 7) or huge (2^32 and more,
//! and then the case runs under an address-space limit of at most 4 GiB,
//! so arrays of them are refused with the bytes they need); run-time
//! counts and static parameters get small, negative or unparsable values
//! only; `bench` and `explore` time each program 1 ms unless the time is
//! fuzzed, and with a valid time of a second or more they do not run;
//! `fdcheck` with more than its default 200 elements gets no benchmark
//! suite (a suite's arrays have up to 10^6 elements, two runs each).

use crate::common::rng::Rng;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

/// One flag as `-h` lists it.
#[derive(Clone, Debug)]
pub struct Flag {
    /// `--dim`.
    pub long: String,
    /// `-o` for `--output`.
    pub short: Option<String>,
    /// Whether it takes a value (`--dim <NAME=SIZE>`).
    pub takes_value: bool,
    /// `[possible values: ...]`.
    pub choices: Vec<String>,
}

/// A function of a bundled example: its size parameters and parameters
/// (name, type as written).
#[derive(Clone, Debug)]
pub struct Func {
    pub file: String,
    pub name: String,
    pub sizes: Vec<String>,
    pub params: Vec<(String, String)>,
    /// Made by `@grad` or `@value_and_grad`: every command takes it.
    pub gradient: bool,
}

impl Func {
    /// Whether `name` (a size or parameter) must stay small: a run-time
    /// count or static value, or a size no parameter's type has (a loop
    /// count, not an array's length).
    fn is_count(&self, name: &str) -> bool {
        self.params
            .iter()
            .any(|(n, t)| n == name && (t == "i64" || t.starts_with("static")))
            || (self.sizes.iter().any(|s| s == name)
                && !self.params.iter().any(|(_, t)| mentions(t, name)))
    }
}

/// Whether the type `t` mentions the size `name` as a word.
fn mentions(t: &str, name: &str) -> bool {
    t.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == name)
}

/// What the fuzzer reads once: the subcommands and their flags, and the
/// examples' functions.
pub struct Cli {
    pub commands: Vec<(String, Vec<Flag>)>,
    /// Whether each command takes a `<FILE>`.
    pub takes_file: Vec<bool>,
    pub funcs: Vec<Func>,
}

impl Cli {
    pub fn read() -> Cli {
        let help = help_of(&[]);
        let mut takes_file = Vec::new();
        let commands: Vec<(String, Vec<Flag>)> = subcommands(&help)
            .into_iter()
            .map(|c| {
                let help = help_of(&[&c]);
                takes_file.push(help.contains("<FILE>"));
                (c, parse_flags(&help))
            })
            .collect();
        let mut funcs = Vec::new();
        for p in crate::common::all_example_files() {
            let text = std::fs::read_to_string(&p).unwrap();
            funcs.extend(parse_funcs(&p.display().to_string(), &text));
        }
        assert!(funcs.len() > 20, "read {} functions", funcs.len());
        Cli {
            commands,
            takes_file,
            funcs,
        }
    }

    /// How many flags there are in all (subcommand, flag).
    pub fn flag_count(&self) -> usize {
        self.commands.iter().map(|(_, f)| f.len()).sum()
    }
}

/// `egrad [cmd] -h`.
fn help_of(cmd: &[&str]) -> String {
    let mut args: Vec<&str> = cmd.to_vec();
    args.push("-h");
    let (code, out, err) = crate::common::egrad(&args);
    assert_eq!(code, 0, "egrad {args:?}: {err}");
    out
}

/// The subcommands `egrad -h` lists (`help` aside).
fn subcommands(help: &str) -> Vec<String> {
    let cmds: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    assert!(cmds.len() >= 9, "subcommands of egrad -h: {cmds:?}");
    cmds
}

/// The flags of one subcommand's `-h`: lines that start with `--x` or
/// `-x,`, a value when `<...>` follows, and the `[possible values: ...]`
/// of its description.
pub fn parse_flags(help: &str) -> Vec<Flag> {
    let mut flags: Vec<Flag> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        let is_flag =
            t.starts_with("--") || (t.len() > 2 && t.starts_with('-') && t.as_bytes()[2] == b',');
        if !is_flag {
            if let Some(f) = flags.last_mut() {
                f.choices.extend(choices_in(t));
            }
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        let (short, rest) = match words[0].strip_suffix(',') {
            Some(s) => (Some(s.to_string()), &words[1..]),
            None => (None, &words[..]),
        };
        let long = rest[0].to_string();
        flags.push(Flag {
            long,
            short,
            takes_value: rest.get(1).is_some_and(|w| w.starts_with('<')),
            choices: choices_in(t),
        });
    }
    flags
}

fn choices_in(text: &str) -> Vec<String> {
    match text.split_once("[possible values: ") {
        Some((_, rest)) => rest
            .split(']')
            .next()
            .unwrap_or("")
            .split(", ")
            .map(String::from)
            .collect(),
        None => Vec::new(),
    }
}

/// The functions of an example file: name, `[sizes]` and `(params)`
/// (a parameter's type as written; `static` kept in front).
pub fn parse_funcs(file: &str, text: &str) -> Vec<Func> {
    let mut funcs = Vec::new();
    for (i, _) in text.match_indices("fn ") {
        if i > 0 && !text[..i].ends_with(|c: char| c.is_whitespace() || c == ')') {
            continue;
        }
        let rest = &text[i + 3..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let rest = &rest[name.len()..];
        let (sizes, rest) = match rest.strip_prefix('[') {
            Some(r) => {
                let (inside, after) = r.split_once(']').unwrap_or(("", r));
                let sizes = inside
                    .split(',')
                    .map(|s| s.trim())
                    .filter(|s| !s.contains(':') && !s.is_empty())
                    .map(String::from)
                    .collect();
                (sizes, after)
            }
            None => (Vec::new(), rest),
        };
        let Some(rest) = rest.strip_prefix('(') else {
            continue;
        };
        let mut depth = 0;
        let mut params = Vec::new();
        let mut cur = String::new();
        for c in rest.chars() {
            match c {
                '[' | '(' => depth += 1,
                ']' => depth -= 1,
                ')' if depth == 0 => break,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    params.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(c);
        }
        params.push(cur);
        let params = params
            .iter()
            .filter_map(|p| {
                let (n, t) = p.split_once(':')?;
                let n = n.trim();
                let (n, st) = match n.strip_prefix("static ") {
                    Some(n) => (n.trim(), "static "),
                    None => (n, ""),
                };
                Some((n.to_string(), format!("{st}{}", t.trim())))
            })
            .collect();
        // The attribute lines right above the `fn`.
        let above = text[..i].trim_end().lines().rev();
        let attrs: Vec<&str> = above
            .take_while(|l| l.trim_start().starts_with('@'))
            .collect();
        let gradient = attrs
            .iter()
            .any(|a| a.contains("@grad") || a.contains("@value_and_grad"));
        if !name.is_empty() {
            funcs.push(Func {
                file: file.to_string(),
                name,
                sizes,
                params,
                gradient,
            });
        }
    }
    funcs
}

/// A 10 KB string.
fn long_text(rng: &mut Rng) -> String {
    rng.pick(&["x", "9", "[", "a=", ",", "é"]).repeat(10_000)
}

/// Bytes that are not UTF-8, in the work folder where a flag takes them
/// for a path to write.
fn not_utf8(work: &Path) -> OsString {
    let mut v = format!("{}/w=", work.display()).into_bytes();
    v.extend([0xff, 0xfe, b'1', 0xc3]);
    OsString::from_vec(v)
}

/// Values no flag takes, or only some: for the wild cases.
const WILD: &[&str] = &[
    "-1",
    "-0",
    "9223372036854775808",
    "18446744073709551616",
    "1e308",
    "1e400",
    "-1e400",
    "5e-324",
    "NaN",
    "inf",
    "-inf",
    "",
    " ",
    "0x10",
    "1_000",
    "=",
    "--",
    "🙂",
];

/// Counts at their edges, all valid where a count is.
const COUNTS_VALID: &[&str] = &[
    "1",
    "2",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
];

/// Sizes that are small or huge (past any array: the case then runs under
/// an address-space limit), and ones that are no size.
const SIZES_SMALL: &[&str] = &["0", "1", "2", "5", "7"];
const SIZES_HUGE: &[&str] = &[
    "4294967297",
    "10000000000",
    "1000000000000",
    "4611686018427387904",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
];
const SIZES_BAD: &[&str] = &[
    "-1",
    "18446744073709551616",
    "1e308",
    "nan",
    "1.5",
    "",
    "0x10",
];

/// Values for a run-time count or static parameter: small, negative or
/// not parsable, never a long loop.
const LOOP_COUNTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "-9223372036854775808",
    "9223372036854775808",
    "1e308",
    "nan",
    "1.5",
    "",
    "true",
];

/// Floats an argument may hold.
const FLOATS: &[&str] = &[
    "0", "-0", "1", "1e308", "-1e308", "5e-324", "1e400", "nan", "inf", "-inf", "1e-300",
];

const LAMBDAS: &[&str] = &["0", "-0", "0.25", "1e50", "5e-324", "1e-300", "1e49"];
const LAMBDAS_BAD: &[&str] = &["1e51", "1e308", "1e400", "nan", "inf", "-inf", "-1", ""];

/// What a case needs besides its arguments.
#[derive(Default, Debug)]
pub struct Plan {
    pub args: Vec<OsString>,
    /// A size past any array: run under an address-space limit.
    pub huge: bool,
}

/// The context a flag's value is drawn in.
pub struct Ctx<'a> {
    pub rng: &'a mut Rng,
    pub func: &'a Func,
    pub work: &'a Path,
    /// Values that are invalid too, not only valid ones at their edges.
    pub wild: bool,
    pub huge: bool,
}

impl Ctx<'_> {
    /// One of `valid`, or in a wild case one of `valid` or `bad`.
    fn pick(&mut self, valid: &[&str], bad: &[&str]) -> String {
        if self.wild && (valid.is_empty() || self.rng.chance(0.5)) {
            self.rng.pick(bad).to_string()
        } else {
            self.rng.pick(valid).to_string()
        }
    }

    /// A name of `names`, or in a wild case now and then no such name.
    fn name_of(&mut self, names: &[String]) -> String {
        if names.is_empty() || (self.wild && self.rng.chance(0.3)) {
            self.rng.pick(&["", "nope", "N", "w", "x"]).to_string()
        } else {
            self.rng.pick(names)
        }
    }
}

/// `NAME=SIZE` for `--dim`: a size small or huge, or in a wild case no
/// size; a loop count small.
fn dim_value(ctx: &mut Ctx, name: &str) -> String {
    if ctx.wild && ctx.rng.chance(0.1) {
        return ctx.rng.pick(&["N", "=5", "N=5=6", "N 5", "N=", "="]).into();
    }
    let size = if ctx.func.is_count(name) {
        ctx.pick(&["0", "1", "3"], LOOP_COUNTS)
    } else if ctx.rng.chance(0.3) {
        ctx.huge = true;
        ctx.rng.pick(SIZES_HUGE).to_string()
    } else {
        ctx.pick(SIZES_SMALL, SIZES_BAD)
    };
    format!("{name}={size}")
}

/// An argument's value: numbers at the edges, lists of them, ragged
/// lists, files that are missing, directories or not arrays.
fn arg_value(ctx: &mut Ctx) -> OsString {
    let names: Vec<String> = ctx.func.params.iter().map(|(n, _)| n.clone()).collect();
    let name = ctx.name_of(&names);
    let ty = (ctx.func.params.iter())
        .find(|(n, _)| *n == name)
        .map_or(String::new(), |(_, t)| t.clone());
    let value = if ctx.func.is_count(&name) {
        ctx.pick(&["0", "1", "3"], LOOP_COUNTS)
    } else if !ty.contains('[') && !ctx.wild {
        ctx.rng.pick(FLOATS).to_string()
    } else {
        let rng = &mut *ctx.rng;
        match rng.below(6) {
            0 => rng.pick(FLOATS).to_string(),
            1 => {
                let n = rng.below(8);
                let xs: Vec<&str> = (0..n).map(|_| rng.pick(FLOATS)).collect();
                format!("[{}]", xs.join(", "))
            }
            2 => rng
                .pick(&[
                    "[[1, 2], [3]]",
                    "[[]]",
                    "[",
                    "[1,]",
                    "[[1,2],[3,4]]",
                    "true",
                    "[]",
                ])
                .to_string(),
            3 => format!("[{}1]", "1, ".repeat(2_500)),
            4 => format!("@{}", path_value(rng, ctx.work).to_string_lossy()),
            _ => long_text(rng),
        }
    };
    OsString::from(format!("{name}={value}"))
}

/// A path: in the work folder (new, an existing folder, one under a
/// missing folder, 10 KB long, not UTF-8), `/dev/full`, `/dev/null`,
/// `/dev/zero` (endless), empty.
fn path_value(rng: &mut Rng, work: &Path) -> OsString {
    let w = work.display();
    match rng.below(11) {
        0 => format!("{w}/out.npy").into(),
        1 => format!("{w}/out.npz").into(),
        2 => format!("{w}/dir").into(),
        3 => format!("{w}/missing/sub/out.o").into(),
        4 => "/dev/full".into(),
        5 => "/dev/null".into(),
        6 => "".into(),
        7 => format!("{w}/{}", "n".repeat(10_000)).into(),
        8 => {
            let mut v = format!("{w}/").into_bytes();
            v.extend([0xff, 0xfe, b'.', b'o']);
            OsString::from_vec(v)
        }
        9 => "/dev/zero".into(),
        _ => format!("{w}/empty.eg").into(),
    }
}

/// A value for `flag` in `ctx`.
pub fn value_for(flag: &Flag, ctx: &mut Ctx) -> OsString {
    if ctx.wild && ctx.rng.chance(0.1) {
        return if ctx.rng.chance(0.5) {
            not_utf8(ctx.work)
        } else {
            long_text(ctx.rng).into()
        };
    }
    if !flag.choices.is_empty() {
        let stem = Path::new(&ctx.func.file)
            .file_stem()
            .unwrap()
            .to_string_lossy();
        let mine: Vec<&str> = (flag.choices.iter())
            .filter(|c| c.starts_with(&*stem))
            .map(|c| c.as_str())
            .collect();
        let all: Vec<&str> = flag.choices.iter().map(|c| c.as_str()).collect();
        return match ctx.rng.below(4) {
            0 if !mine.is_empty() => ctx.rng.pick(&mine).into(),
            _ => ctx.pick(&all, &["nope", "", "FULL"]).into(),
        };
    }
    let v: String = match flag.long.as_str() {
        "--dim" => {
            let name = ctx.name_of(&ctx.func.sizes.clone());
            dim_value(ctx, &name)
        }
        "--arg" => return arg_value(ctx),
        "--args" => format!("@{}", path_value(ctx.rng, ctx.work).to_string_lossy()),
        "--out" | "--plot" | "--output" | "--header" => return path_value(ctx.rng, ctx.work),
        "--rules" => ctx.pick(
            &["rulesets"],
            &[
                "examples",
                "examples/loss.eg",
                "/nonexistent",
                "/dev/null",
                "",
            ],
        ),
        "--lambda" | "--lambda-before" => ctx.pick(LAMBDAS, LAMBDAS_BAD),
        "--lambdas" => {
            let n = ctx.rng.below(12);
            let xs: Vec<String> = (0..n).map(|_| ctx.pick(LAMBDAS, LAMBDAS_BAD)).collect();
            xs.join(",")
        }
        "--memory-limit" => ctx.pick(
            &[
                "1",
                "1K",
                "64M",
                "1G",
                "1T",
                "16777215T",
                "18446744073709551615",
            ],
            &[
                "0",
                "16E",
                "16383P",
                "16777216T",
                "1.5G",
                "G",
                "-1",
                "1 G",
                "18446744073709551616",
            ],
        ),
        "--time-limit" => ctx.pick(
            &[
                "0",
                "5e-324",
                "1e-9",
                "0.001",
                "1e19",
                "18446744073709551000",
            ],
            &[
                "18446744073709551615",
                "1.9e19",
                "inf",
                "nan",
                "-1",
                "1e400",
            ],
        ),
        "--tol" => ctx.pick(
            &["0", "5e-324", "1e308", "-0"],
            &["inf", "nan", "-1", "1e400"],
        ),
        "--time-ms" => ctx.pick(
            &["1", "2", "3600000"],
            &["0", "3600001", "18446744073709551616"],
        ),
        "--fn" => {
            let names = vec![ctx.func.name.clone()];
            ctx.name_of(&names)
        }
        "--wrt" => {
            let names: Vec<String> = ctx.func.params.iter().map(|(n, _)| n.clone()).collect();
            ctx.name_of(&names)
        }
        "--seed" => ctx.pick(&["0", "18446744073709551615"], WILD),
        "--node-limit" | "--iter-limit" | "--max-elements" => ctx.pick(COUNTS_VALID, WILD),
        _ => ctx.pick(&["0", "1", "18446744073709551615"], WILD),
    };
    v.into()
}

/// The arguments of one case: a subcommand, a file (mostly a bundled
/// example, now and then a missing path, a folder, `/dev/zero`, an empty
/// or 10 KB name), its function (a gradient more often than not),
/// `--random` and small sizes for its size parameters, and a random
/// subset of the subcommand's flags with values from [`value_for`] (valid
/// ones at their edges; in a quarter of the cases invalid ones too, a flag
/// twice, an unknown flag); the flags fuzzed are marked in `seen`.
pub fn case(rng: &mut Rng, cli: &Cli, work: &Path, seen: &mut [Vec<bool>]) -> Plan {
    let c = rng.below(cli.commands.len());
    let (cmd, flags) = &cli.commands[c];
    let gradients: Vec<&Func> = cli.funcs.iter().filter(|f| f.gradient).collect();
    let func = if rng.chance(0.6) {
        rng.pick(&gradients).clone()
    } else {
        rng.pick(&cli.funcs)
    };
    let file: OsString = match rng.below(40) {
        0 => "/nonexistent.eg".into(),
        1 => "examples".into(),
        2 => format!("{}/empty.eg", work.display()).into(),
        3 => "/dev/null".into(),
        4 => "".into(),
        5 => "n".repeat(10_000).into(),
        6 => "/dev/zero".into(),
        _ => func.file.clone().into(),
    };
    let wild = rng.chance(0.25);
    let mut ctx = Ctx {
        rng,
        func: &func,
        work,
        wild,
        huge: false,
    };
    // `--help` prints and exits: rarely, unless it is the only flag.
    let help = if flags.len() == 1 { 0.5 } else { 0.05 };
    let pool: Vec<usize> = (0..flags.len())
        .filter(|&i| flags[i].long != "--help" || ctx.rng.chance(help))
        .collect();
    let mut chosen: Vec<usize> = if pool.is_empty() {
        Vec::new()
    } else {
        (0..ctx.rng.below(6)).map(|_| ctx.rng.pick(&pool)).collect()
    };
    chosen.sort_unstable();
    chosen.dedup();
    ctx.rng.shuffle(&mut chosen);
    // In a wild case now and then a flag twice.
    if let Some(&i) = chosen.first() {
        if wild && ctx.rng.chance(0.3) {
            chosen.push(i);
        }
    }
    let mut given: Vec<String> = Vec::new();
    let mut rest: Vec<OsString> = Vec::new();
    for &i in &chosen {
        let flag = &flags[i];
        seen[c][i] = true;
        given.push(flag.long.clone());
        push_flag(&mut ctx, flag, &mut rest);
    }
    let has = |f: &str| given.iter().any(|g| g == f);
    let takes = |f: &str| flags.iter().any(|g| g.long == f);
    let mut args: Vec<OsString> = vec![cmd.into()];
    // The case's own flags, each unless fuzzed: what makes it a run.
    if takes("--fn") && !has("--fn") {
        args.extend(["--fn".into(), func.name.clone().into()]);
    }
    if takes("--random") && !has("--random") && !has("--suite") && ctx.rng.chance(0.9) {
        args.push("--random".into());
    }
    if takes("--dim") {
        for size in &func.sizes {
            if ctx.rng.chance(0.9) {
                let v = if func.is_count(size) { "3" } else { "5" };
                args.extend(["--dim".into(), format!("{size}={v}").into()]);
            }
        }
    }
    if takes("--output") && !has("--output") {
        args.extend(["-o".into(), format!("{}/out.o", work.display()).into()]);
    }
    if takes("--time-ms") && !has("--time-ms") {
        args.extend(["--time-ms".into(), "1".into()]);
    }
    bound_work(&mut rest, &given, takes("--no-run"));
    if wild && ctx.rng.chance(0.2) {
        let unknown = ctx
            .rng
            .pick(&["--threads", "--no-such-flag", "-x", "--jobs=-1"]);
        rest.push(unknown.into());
    }
    // The file first or last (`gradbench` takes none).
    let file: Vec<OsString> = if cli.takes_file[c] {
        vec![file]
    } else {
        Vec::new()
    };
    if ctx.rng.chance(0.5) {
        args.extend(file);
        args.extend(rest);
    } else {
        args.extend(rest);
        args.extend(file);
    }
    Plan {
        args,
        huge: ctx.huge,
    }
}

/// `flag` (its short name now and then) and its value, as two words or
/// as `--flag=value` (the only way a value may start with `-`).
fn push_flag(ctx: &mut Ctx, flag: &Flag, rest: &mut Vec<OsString>) {
    let name = match &flag.short {
        Some(s) if ctx.rng.chance(0.3) => s.clone(),
        _ => flag.long.clone(),
    };
    if !flag.takes_value {
        rest.push(name.into());
        return;
    }
    let v = value_for(flag, ctx);
    let dash = v.to_string_lossy().starts_with('-');
    if name.starts_with("--") && (dash || ctx.rng.chance(0.4)) {
        let mut joined = OsString::from(format!("{name}="));
        joined.push(&v);
        rest.push(joined);
    } else {
        rest.push(name.into());
        rest.push(v);
    }
}

/// The values given to `flag` in `rest`, as text.
fn values_of(rest: &[OsString], flag: &str) -> Vec<String> {
    let mut vs = Vec::new();
    for (k, a) in rest.iter().enumerate() {
        let a = a.to_string_lossy();
        if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            vs.push(v.to_string());
        } else if a == flag {
            if let Some(v) = rest.get(k + 1) {
                vs.push(v.to_string_lossy().into_owned());
            }
        }
    }
    vs
}

/// Make long work impossible: a valid `--time-ms` of a second or more
/// (up to an hour per program) comes with `--no-run`; `--max-elements`
/// other than small comes without `--suite` (whose arrays have up to
/// 10^6 elements, each checked by two runs).
fn bound_work(rest: &mut Vec<OsString>, given: &[String], has_no_run: bool) {
    let long_time = values_of(rest, "--time-ms")
        .iter()
        .any(|v| v.trim().parse::<u64>().is_ok_and(|ms| ms >= 1000));
    if long_time && has_no_run {
        rest.push("--no-run".into());
    }
    let many = values_of(rest, "--max-elements")
        .iter()
        .any(|v| v.trim().parse::<u64>().map_or(true, |n| n > 200));
    if many && given.iter().any(|g| g == "--suite") {
        let mut k = 0;
        while k < rest.len() {
            let a = rest[k].to_string_lossy().into_owned();
            if a == "--suite" {
                rest.drain(k..(k + 2).min(rest.len()));
            } else if a.starts_with("--suite=") {
                rest.remove(k);
            } else {
                k += 1;
            }
        }
    }
}
