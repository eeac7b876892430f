//! The names in scope while a body is lowered: a stack of bindings,
//! innermost last, with an index by name, so that looking a name up costs
//! the same however many `let`s come before it (a linear scan made a long
//! `let` block check in quadratic time).

use super::Val;
use std::collections::HashMap;

/// The bindings in scope, innermost last ([`Env::truncate`] leaves a
/// block), and for each name where it is bound, innermost last.
#[derive(Clone, Debug, Default)]
pub(super) struct Env {
    entries: Vec<(String, Val)>,
    by_name: HashMap<String, Vec<usize>>,
}

impl Env {
    /// How many bindings are in scope: a mark for [`Env::truncate`].
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bind `name` to a value, shadowing any earlier binding of it.
    pub(super) fn push(&mut self, (name, v): (String, Val)) {
        self.by_name
            .entry(name.clone())
            .or_default()
            .push(self.entries.len());
        self.entries.push((name, v));
    }

    /// Drop the bindings made since `mark` (a [`Env::len`]).
    pub(super) fn truncate(&mut self, mark: usize) {
        while self.entries.len() > mark {
            let Some((name, _)) = self.entries.pop() else {
                break;
            };
            if let Some(at) = self.by_name.get_mut(&name) {
                at.pop();
                if at.is_empty() {
                    self.by_name.remove(&name);
                }
            }
        }
    }

    /// The innermost binding of `name`.
    pub(super) fn get(&self, name: &str) -> Option<&Val> {
        let at = *self.by_name.get(name)?.last()?;
        self.entries.get(at).map(|(_, v)| v)
    }

    /// The names bound (each once), for "did you mean".
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Whether `name` is bound.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Replace each bound value for which `f` gives a new one.
    pub(super) fn update(&mut self, mut f: impl FnMut(&Val) -> Option<Val>) {
        for (_, v) in &mut self.entries {
            if let Some(new) = f(v) {
                *v = new;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(k: f64) -> Val {
        Val::Const(k)
    }

    fn value(env: &Env, name: &str) -> Option<f64> {
        match env.get(name) {
            Some(Val::Const(k)) => Some(*k),
            _ => None,
        }
    }

    #[test]
    fn shadowing_and_leaving_a_block() {
        let mut env = Env::default();
        env.push(("x".into(), var(1.0)));
        env.push(("y".into(), var(2.0)));
        let mark = env.len();
        env.push(("x".into(), var(3.0)));
        env.push(("z".into(), var(4.0)));
        assert_eq!(value(&env, "x"), Some(3.0));
        assert_eq!(value(&env, "z"), Some(4.0));
        env.truncate(mark);
        assert_eq!(value(&env, "x"), Some(1.0));
        assert_eq!(value(&env, "y"), Some(2.0));
        assert_eq!(value(&env, "z"), None);
        assert!(!env.contains("z"));
        assert!(env.contains("y"));
        env.update(|v| match v {
            Val::Const(k) if *k > 1.5 => Some(Val::Const(k * 10.0)),
            _ => None,
        });
        assert_eq!(value(&env, "y"), Some(20.0));
        assert_eq!(value(&env, "x"), Some(1.0));
        env.truncate(0);
        assert_eq!(env.len(), 0);
        assert!(!env.contains("x"));
    }
}
