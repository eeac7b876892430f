//! `egrad explore --plot --html` rendered by headless Chromium: the page's
//! own script (its `#selftest`) hovers every point with real mouse events
//! and writes what each tooltip showed and where each point, label and
//! tick was drawn; this test reads that back from `--dump-dom` and checks
//! it. Chromium is `chromium` (Debian's package) on the PATH, or the
//! program `EGRAD_CHROMIUM` names; without it the test says it skipped,
//! unless `EGRAD_REQUIRE_CHROMIUM=1` (CI), where it fails.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LAMBDAS: &str = "0,3,3.5,6,16,1e6";

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EGRAD_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Run `cmd`, killed after `limit`; its stdout.
fn run_with_limit(cmd: &mut Command, limit: Duration) -> String {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .expect("start chromium");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The number an SI tick label stands for ("2.5k" is 2500).
fn si_value(s: &str) -> Option<f64> {
    let (num, scale) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        'T' => (&s[..s.len() - 1], 1e12),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

type Box4 = [f64; 4];

fn rect(v: &Value) -> Box4 {
    let a = v.as_array().expect("a box");
    [0, 1, 2, 3].map(|i| a[i].as_f64().unwrap())
}

fn overlap(a: &Box4, b: &Box4) -> bool {
    // Half a pixel of slack: boxes that only touch do not overlap.
    a[0] < b[2] - 0.5 && b[0] < a[2] - 0.5 && a[1] < b[3] - 0.5 && b[1] < a[3] - 0.5
}

fn centre(b: &Box4) -> (f64, f64) {
    ((b[0] + b[2]) / 2.0, (b[1] + b[3]) / 2.0)
}

/// The tick labels along one axis: (position along the axis, value),
/// in the order drawn along it (left to right, bottom to top).
fn ticks(texts: &[(String, Box4)], select: impl Fn(&Box4) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut t: Vec<(f64, f64)> = texts
        .iter()
        .filter_map(|(s, b)| Some((select(b)?, si_value(s)?)))
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    t
}

fn explore(dir: &Path) -> Value {
    let (svg, html) = (dir.join("x.svg"), dir.join("x.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_egrad"))
        .args([
            "explore",
            "examples/suite/euler_ode.eg",
            "--fn",
            "euler_ode_grad",
            "--lambdas",
            LAMBDAS,
            "--time-ms",
            "10",
            "--json",
            "--plot",
        ])
        .arg(&svg)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Pareto front"));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One point per distinct program, inside the plot area on a drawn
/// marker, in the data's order; every λ named by exactly one tooltip,
/// with its program's figures.
fn check_points(st: &Value, table: &Value, area: &Box4) {
    let points = table["points"].as_array().unwrap();
    let lambdas: Vec<f64> = LAMBDAS.split(',').map(|l| l.parse().unwrap()).collect();
    assert_eq!(points.len(), lambdas.len());
    let distinct: Vec<&Value> = points.iter().filter(|p| p["same_as"].is_null()).collect();
    let shown = st["points"].as_array().unwrap();
    assert_eq!(shown.len(), distinct.len(), "{st}");
    let mut named = vec![0; lambdas.len()];
    for (p, d) in shown.iter().zip(&distinct) {
        let tip = p["tip"]
            .as_str()
            .unwrap_or_else(|| panic!("no tooltip: {p}"));
        let head = tip.lines().next().unwrap();
        let listed: Vec<f64> = head
            .strip_prefix("λ = ")
            .unwrap_or_else(|| panic!("{tip}"))
            .split(", ")
            .map(|l| l.parse().unwrap())
            .collect();
        assert!(
            listed.contains(&d["lambda"].as_f64().unwrap()),
            "{tip} / {d}"
        );
        for l in listed {
            let k = lambdas.iter().position(|x| *x == l).expect("a λ explored");
            named[k] += 1;
        }
        let bytes = d["residual_bytes"].as_f64().unwrap();
        let flops = d["flops"].as_f64().unwrap();
        assert!(tip.contains(&format!("residual bytes {bytes} ")), "{tip}");
        assert!(tip.contains(&format!("flops {flops};")), "{tip}");
        assert!(tip.contains(" µs per call"), "{tip}");
        assert!(tip.contains("residual plan:"), "{tip}");
        let front = if d["pareto"] == true {
            "on the Pareto front"
        } else {
            "dominated"
        };
        assert!(tip.contains(front), "{tip}");
        // The point lies inside the plot area, on a drawn marker.
        let (x, y) = centre(&rect(&p["box"]));
        assert!(
            area[0] < x && x < area[2] && area[1] < y && y < area[3],
            "{p}"
        );
        let drawn = st["circles"].as_array().unwrap().iter().any(|c| {
            let (cx, cy) = centre(&rect(c));
            (cx - x).abs() < 1.5 && (cy - y).abs() < 1.5
        });
        assert!(drawn, "no marker under the point at ({x}, {y})");
    }
    assert!(named.iter().all(|n| *n == 1), "λ named {named:?} times");

    // Faster programs lower, fewer bytes further left.
    let at = |k: usize| centre(&rect(&shown[k]["box"]));
    for i in 0..distinct.len() {
        for j in 0..distinct.len() {
            let (bi, bj) = (
                distinct[i]["residual_bytes"].as_f64().unwrap(),
                distinct[j]["residual_bytes"].as_f64().unwrap(),
            );
            let (ti, tj) = (
                distinct[i]["time_us"].as_f64().unwrap(),
                distinct[j]["time_us"].as_f64().unwrap(),
            );
            if bi < bj {
                assert!(at(i).0 < at(j).0, "x order of {i} and {j}");
            }
            if ti < tj {
                assert!(at(i).1 >= at(j).1, "y order of {i} and {j}");
            }
        }
    }
}

/// Render `dir/x.html#selftest` in headless Chromium; what its script
/// wrote into `<pre id="selftest">`.
fn selftest(chrome: &Path, dir: &Path) -> Value {
    let page = std::fs::canonicalize(dir.join("x.html")).unwrap();
    let dom = run_with_limit(
        Command::new(chrome)
            .args([
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                "--window-size=1000,1200",
                "--dump-dom",
            ])
            .arg(format!("--user-data-dir={}", dir.join("profile").display()))
            .arg(format!("file://{}#selftest", page.display())),
        Duration::from_secs(120),
    );
    let start = dom
        .find("<pre id=\"selftest\">")
        .unwrap_or_else(|| panic!("no selftest in the page: {dom}"));
    let body = &dom[start + "<pre id=\"selftest\">".len()..];
    let body = &body[..body.find("</pre>").unwrap()];
    let st: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    st
}

#[test]
fn the_html_report_renders_its_points_axes_and_tooltips_in_chromium() {
    let Some(chrome) = chromium() else {
        if std::env::var("EGRAD_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!(
                "EGRAD_REQUIRE_CHROMIUM=1 but no chromium on the PATH (apt-get install chromium)"
            );
        }
        eprintln!(
            "SKIPPED the_html_report_renders_its_points_axes_and_tooltips_in_chromium: \
             no chromium on the PATH (apt-get install chromium, or set EGRAD_CHROMIUM)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("egrad-explore-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = explore(&dir);
    let st = selftest(&chrome, &dir);
    let area = rect(&st["area"]);
    assert!(
        area[2] - area[0] > 300.0 && area[3] - area[1] > 200.0,
        "{area:?}"
    );

    check_points(&st, &table, &area);
    let texts: Vec<(String, Box4)> = st["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().trim().to_string(),
                rect(&t["box"]),
            )
        })
        .collect();
    // Ticks: below the plot area (x) and left of it (y), values rising
    // along each axis, at least three each.
    let xt = ticks(&texts, |b| {
        let (cx, _) = centre(b);
        (b[1] >= area[3] - 1.0 && b[3] <= area[3] + 30.0).then_some(cx)
    });
    let yt = ticks(&texts, |b| {
        let (_, cy) = centre(b);
        (b[2] <= area[0] + 1.0 && b[0] >= area[0] - 70.0).then_some(-cy)
    });
    for (axis, t, log) in [("x", &xt, &st["x_log"]), ("y", &yt, &st["y_log"])] {
        assert!(t.len() >= 3, "{axis} ticks: {t:?}");
        assert!(
            t.windows(2).all(|w| w[0].1 < w[1].1),
            "{axis} ticks out of order: {t:?}"
        );
        // A log axis spaces each decade alike.
        if log == true {
            let decades: Vec<f64> = t
                .iter()
                .filter(|(_, v)| *v > 0.0 && v.log10().fract() == 0.0)
                .map(|(p, _)| *p)
                .collect();
            assert!(decades.len() >= 2, "{axis}: {t:?}");
            let steps: Vec<f64> = decades.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(
                steps.iter().all(|s| (s - steps[0]).abs() <= 2.0),
                "{axis}: {steps:?}"
            );
        }
    }
    // Residual bytes span 544 to 31,984 and times about a decade: the
    // bytes axis is logarithmic.
    assert_eq!(st["x_log"], true, "{st}");

    // Point labels: inside the plot area, no two overlapping, none over a
    // point.
    let labels: Vec<&Box4> = texts
        .iter()
        .filter(|(s, _)| s.starts_with("λ="))
        .map(|(_, b)| b)
        .collect();
    assert!(!labels.is_empty());
    for (i, a) in labels.iter().enumerate() {
        assert!(
            a[0] >= area[0] && a[2] <= area[2] && a[1] >= area[1] && a[3] <= area[3],
            "{a:?}"
        );
        for b in &labels[i + 1..] {
            assert!(!overlap(a, b), "labels overlap: {a:?} {b:?}");
        }
        for c in st["circles"].as_array().unwrap() {
            let c = rect(c);
            let (cx, cy) = centre(&c);
            if cx > area[0] && cy > area[1] && cx < area[2] && cy < area[3] {
                assert!(!overlap(a, &c), "label {a:?} over the point {c:?}");
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
