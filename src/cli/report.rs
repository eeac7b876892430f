//! `egrad explore --html`: one self-contained page (no script, font or
//! image from elsewhere) with the plot of `--plot` inline, a tooltip per
//! point (that program's λ values, run time, residual bytes, flops, cost
//! and residual plan) and a table of every λ below.
//!
//! The plot is plotters' SVG with a layer added on top: a transparent
//! circle over each point (class `hit`, what the pointer finds) and the
//! plot area's box (`#plotarea`). The figures travel as JSON in a
//! `<script type="application/json">` (`<`, `>` and `&` escaped, so no
//! text in it can end the script); the page's script builds the tooltip
//! with `textContent`, never markup. With `#selftest` in the address, the
//! script hovers every point itself and writes what each tooltip said and
//! where every point, label and tick was drawn into `<pre id="selftest">`
//! (as JSON) for a headless browser to dump (`tests/explore_html.rs`).

use super::plot::{Drawn, HEIGHT, WIDTH};
use egrad::{Exploration, Point};
use serde_json::{json, Value};
use std::fmt::Write;

/// `s` with `&`, `<`, `>` and `"` escaped, for HTML text and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// JSON that can sit inside a `<script>`: `<`, `>` and `&` as `\u` escapes.
fn script_json(v: &Value) -> String {
    let mut out = String::new();
    for c in v.to_string().chars() {
        match c {
            '<' | '>' | '&' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            _ => out.push(c),
        }
    }
    out
}

fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// One program's figures, for its tooltip.
fn summary(e: &Exploration, p: &Point, lambdas: &[usize]) -> Value {
    let plan: Vec<Value> = p
        .choices
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.ty.to_string(),
                "stored": c.stored,
                "bytes": number(c.bytes),
                "cost": number(c.cost),
                "other": c.other.map(number),
            })
        })
        .collect();
    json!({
        "lambdas": lambdas.iter().map(|&j| number(e.points[j].lambda)).collect::<Vec<_>>(),
        "time_us": p.time.map(|t| number(t.as_secs_f64() * 1e6)),
        "residual_bytes": number(p.residual_bytes),
        "flops": number(p.flops),
        "cost": number(p.flops + p.lambda * p.residual_bytes),
        "lambda": number(p.lambda),
        "stored": p.stored,
        "recomputed": p.recomputed,
        "buffer_bytes": p.buffer_bytes,
        "pareto": p.pareto,
        "plan": plan,
    })
}

fn cell(x: Option<String>) -> String {
    x.map_or_else(|| "–".into(), |s| escape(&s))
}

/// The table: one row per λ, in the order given.
fn table(e: &Exploration, drawn: &Drawn) -> String {
    let mut s = String::from(
        "<table id=\"points\">\n<thead><tr><th>λ</th><th>run time (µs)</th><th>residual bytes</th><th>flops</th><th>cost (flops + λ · bytes)</th><th>stored</th><th>recomputed</th><th>buffer bytes</th><th>Pareto front</th></tr></thead>\n<tbody>\n",
    );
    for (i, p) in e.points.iter().enumerate() {
        let mark = drawn.marks.iter().position(|m| m.lambdas.contains(&i));
        let front = match p.same_as {
            Some(k) => format!("same program as λ = {}", e.points[k].lambda),
            None if p.pareto => "yes".into(),
            None => "no".into(),
        };
        let _ = writeln!(
            s,
            "<tr data-mark=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            mark.map_or_else(String::new, |m| m.to_string()),
            escape(&p.lambda.to_string()),
            cell(p.time.map(|t| format!("{:.3}", t.as_secs_f64() * 1e6))),
            escape(&p.residual_bytes.to_string()),
            escape(&p.flops.to_string()),
            escape(&(p.flops + p.lambda * p.residual_bytes).to_string()),
            p.stored,
            p.recomputed,
            cell(p.buffer_bytes.map(|b| b.to_string())),
            escape(&front),
        );
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// The plot's SVG with the hover layer and the plot area's box added.
fn interactive_svg(drawn: &Drawn) -> String {
    let mut layer = String::new();
    let a = &drawn.area;
    let _ = writeln!(
        layer,
        "<rect id=\"plotarea\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" pointer-events=\"none\"/>",
        a.x0,
        a.y0,
        a.x1 - a.x0,
        a.y1 - a.y0
    );
    layer.push_str("<g id=\"hits\">\n");
    for (k, m) in drawn.marks.iter().enumerate() {
        let _ = writeln!(
            layer,
            "<circle class=\"hit\" data-mark=\"{k}\" cx=\"{}\" cy=\"{}\" r=\"9\" fill=\"#000\" fill-opacity=\"0\" pointer-events=\"all\"/>",
            m.x, m.y
        );
    }
    layer.push_str("</g>\n");
    let svg = drawn.svg.trim_end();
    let body = svg.strip_suffix("</svg>").unwrap_or(svg);
    let body = body.replacen("<svg ", "<svg id=\"plot\" ", 1);
    format!("{body}{layer}</svg>")
}

const STYLE: &str = "body{font:14px sans-serif;margin:1.5em;color:#222}
#figure{position:relative;width:WIDTHpx;height:HEIGHTpx}
#plot{display:block}
#tip{position:absolute;z-index:2;max-width:380px;background:#fff;border:1px solid #888;border-radius:4px;padding:6px 8px;box-shadow:2px 2px 6px rgba(0,0,0,.2);pointer-events:none;font-size:13px;line-height:1.35}
#tip .head{font-weight:bold}
#tip ul{margin:2px 0 0 1em;padding:0}
table{border-collapse:collapse;margin-top:1em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
tr.on{background:#fde8e8}
.hit{cursor:pointer}";

const SCRIPT: &str = r#"(function () {
const data = JSON.parse(document.getElementById('data').textContent);
const fig = document.getElementById('figure'), tip = document.getElementById('tip');
function add(parent, tag, text, cls) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (cls) el.className = cls;
  parent.appendChild(el);
  return el;
}
function show(k) {
  const m = data.marks[k], p = m.point;
  tip.replaceChildren();
  add(tip, 'div', 'λ = ' + p.lambdas.join(', '), 'head');
  add(tip, 'div', p.time_us === null ? 'not timed' : 'run time ' + p.time_us.toFixed(3) + ' µs per call');
  add(tip, 'div', 'residual bytes ' + p.residual_bytes + ' (' + p.stored + ' stored, ' + p.recomputed + ' recomputed)');
  add(tip, 'div', 'flops ' + p.flops + '; cost at λ = ' + p.lambda + ': ' + p.cost);
  if (p.buffer_bytes !== null) add(tip, 'div', 'buffer bytes ' + p.buffer_bytes);
  add(tip, 'div', p.pareto ? 'on the Pareto front' : 'dominated');
  if (p.plan.length) {
    add(tip, 'div', 'residual plan:');
    const ul = add(tip, 'ul');
    for (const c of p.plan.slice(0, 12))
      add(ul, 'li', (c.stored ? 'store ' : 'recompute ') + c.name + ': ' + c.type + ', ' + c.bytes + ' B');
    if (p.plan.length > 12) add(ul, 'li', '… and ' + (p.plan.length - 12) + ' more');
  }
  tip.hidden = false;
  const left = Math.min(m.x + 14, fig.clientWidth - tip.offsetWidth - 4);
  tip.style.left = Math.max(0, left) + 'px';
  tip.style.top = Math.max(0, m.y - tip.offsetHeight - 10) + 'px';
  for (const tr of document.querySelectorAll('#points tr[data-mark]'))
    tr.classList.toggle('on', tr.dataset.mark === String(k));
}
function hide() {
  tip.hidden = true;
  for (const tr of document.querySelectorAll('#points tr.on')) tr.classList.remove('on');
}
fig.addEventListener('mouseover', ev => {
  const hit = ev.target.closest('.hit');
  if (hit) show(+hit.dataset.mark);
});
fig.addEventListener('mouseout', ev => {
  if (ev.target.closest('.hit')) hide();
});
if (location.hash === '#selftest') {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const plot = document.getElementById('plot');
  const out = { area: box(document.getElementById('plotarea')), x_log: data.x_log, y_log: data.y_log, points: [], texts: [], circles: [] };
  for (const hit of document.querySelectorAll('#hits .hit')) {
    const b = box(hit);
    const at = { bubbles: true, view: window, clientX: (b[0] + b[2]) / 2, clientY: (b[1] + b[3]) / 2 };
    hit.dispatchEvent(new MouseEvent('mouseover', at));
    hit.dispatchEvent(new MouseEvent('mouseenter', Object.assign({}, at, { bubbles: false })));
    out.points.push({ mark: +hit.dataset.mark, box: b, tip: tip.hidden ? null : tip.innerText, tip_box: box(tip) });
    hit.dispatchEvent(new MouseEvent('mouseout', at));
  }
  for (const t of plot.querySelectorAll('text')) out.texts.push({ text: t.textContent, box: box(t) });
  for (const c of plot.querySelectorAll('circle')) if (!c.closest('#hits')) out.circles.push(box(c));
  const pre = document.createElement('pre');
  pre.id = 'selftest';
  pre.textContent = JSON.stringify(out).replace(/[<>&]/g, c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  document.body.appendChild(pre);
}
})();"#;

/// The page for `e`, with `drawn` (its plot) inline.
pub fn html(e: &Exploration, drawn: &Drawn) -> String {
    let marks: Vec<Value> = drawn
        .marks
        .iter()
        .map(|m| {
            json!({
                "x": m.x,
                "y": m.y,
                "point": summary(e, &e.points[m.index], &m.lambdas),
            })
        })
        .collect();
    let data = json!({
        "function": e.function,
        "x_log": drawn.x.log,
        "y_log": drawn.y.log,
        "marks": marks,
    });
    let sizes: Vec<String> = e.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>egrad explore: {f}</title>\n<style>\n{style}\n</style>\n</head>\n<body>\n<h1>Store or recompute: <code>{f}</code></h1>\n<p>Each λ (flops per stored residual byte) chose the program that minimises the cost model flops + λ · residual bytes{at}. Hover a point for its program; the table lists every λ.</p>\n<div id=\"figure\">\n{svg}\n<div id=\"tip\" role=\"tooltip\" hidden></div>\n</div>\n",
        f = escape(&e.function),
        style = STYLE
            .replace("WIDTH", &WIDTH.to_string())
            .replace("HEIGHT", &HEIGHT.to_string()),
        at = if sizes.is_empty() {
            String::new()
        } else {
            format!(", priced at {}", escape(&sizes.join(", ")))
        },
        svg = interactive_svg(drawn),
    );
    s.push_str(&table(e, drawn));
    for l in &e.limits {
        let _ = writeln!(s, "<p>e-graph stopped at a limit: {}</p>", escape(l));
    }
    let _ = write!(
        s,
        "<script type=\"application/json\" id=\"data\">{}</script>\n<script>\n{SCRIPT}\n</script>\n</body>\n</html>\n",
        script_json(&data)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_are_escaped() {
        assert_eq!(
            escape("<b>\"x\" & 'y'</b>"),
            "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"
        );
        let j = script_json(&json!({"name": "</script><script>alert(1)</script>&"}));
        assert!(
            !j.contains('<') && !j.contains('>') && !j.contains('&'),
            "{j}"
        );
        let back: Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["name"], "</script><script>alert(1)</script>&");
    }

    #[test]
    fn the_page_is_self_contained() {
        let e = Exploration {
            function: "f<x>".into(),
            dims: vec![("N".into(), 8)],
            points: vec![Point {
                lambda: 0.0,
                flops: 10.0,
                residual_bytes: 64.0,
                stored: 1,
                recomputed: 0,
                choices: Vec::new(),
                time: None,
                buffer_bytes: None,
                same_as: None,
                pareto: true,
                outputs: Vec::new(),
            }],
            limits: vec!["a <limit>".into()],
        };
        let d = super::super::plot::draw(&e).unwrap();
        let page = html(&e, &d);
        assert_eq!(page, html(&e, &d), "deterministic");
        assert!(page.contains("<code>f&lt;x&gt;</code>"));
        assert!(page.contains("a &lt;limit&gt;"));
        assert!(!page.contains("f<x>"));
        for outside in ["src=", "href=", "@import", "url("] {
            assert!(!page.contains(outside), "{outside}");
        }
        assert_eq!(page.matches("class=\"hit\"").count(), 1);
        assert!(page.contains("<svg id=\"plot\" "));
    }
}
