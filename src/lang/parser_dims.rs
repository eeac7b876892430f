//! The parser's dimensions: `N`, `3`, size expressions of them with `+`,
//! `-`, `*` and parentheses, and the shape of `reshape[d, ...]` and its
//! kin.

use super::{PResult, Parser};
use crate::lang::ast::{DimExpr, DimOp, Ident};
use crate::lang::lexer::Tok;

impl Parser<'_> {
    /// A dimension: `N`, `3`, `N-1`, or a size expression of them with
    /// `+`, `-`, `*` and parentheses (`2*N+1`, `N*M`, `2*(N-1)`).
    /// `name[d, ...]` of `reshape`, `uniform` and `normal` (at the name,
    /// a bracket next): the shape.
    pub(super) fn named_shape(&mut self) -> PResult<Vec<DimExpr>> {
        self.bump();
        self.bump();
        let mut shape = vec![self.dim()?];
        while self.eat(&Tok::Comma) {
            shape.push(self.dim()?);
        }
        self.expect(&Tok::RBracket)?;
        Ok(shape)
    }

    pub(super) fn dim(&mut self) -> PResult<DimExpr> {
        self.enter()?;
        let r = self.dim_sum();
        self.leave();
        r
    }

    fn dim_sum(&mut self) -> PResult<DimExpr> {
        let mut l = self.dim_product()?;
        loop {
            let op = match self.peek() {
                Tok::Plus => DimOp::Add,
                Tok::Minus => DimOp::Sub,
                _ => return Ok(l),
            };
            self.bump();
            let r = self.dim_product()?;
            let span = l.span().to(r.span());
            l = match (op, l, r) {
                (DimOp::Sub, DimExpr::Name(id), DimExpr::Lit(k, _)) => DimExpr::Sub(id, k, span),
                (op, l, r) => DimExpr::Bin(op, Box::new(l), Box::new(r), span),
            };
        }
    }

    fn dim_product(&mut self) -> PResult<DimExpr> {
        let mut l = self.dim_atom()?;
        while self.eat(&Tok::Star) {
            let r = self.dim_atom()?;
            let span = l.span().to(r.span());
            l = DimExpr::Bin(DimOp::Mul, Box::new(l), Box::new(r), span);
        }
        Ok(l)
    }

    fn dim_atom(&mut self) -> PResult<DimExpr> {
        match self.peek().clone() {
            Tok::Num { int: Some(n), .. } => {
                let s = self.bump().span;
                Ok(DimExpr::Lit(n, s))
            }
            Tok::Ident(name) => {
                let s = self.bump().span;
                Ok(DimExpr::Name(Ident { name, span: s }))
            }
            Tok::LParen => {
                self.bump();
                let d = self.dim()?;
                self.expect(&Tok::RParen)?;
                Ok(d)
            }
            _ => Err(self.error_expected(
                "a dimension (a size parameter, a non-negative integer, or a size expression such as `N-1`, `N+1` or `2*N`)",
            )),
        }
    }
}
