//! The secret of one execution of a plan with runtime filters.
//!
//! [`super::super::scope::BloomQueryExec`] draws a [`RunKey`] each time it
//! executes: a fresh scope and 128 bits from the operating system's RNG. The
//! key travels in the task plans sent to the workers (the tap's and the
//! probe node's bytes, docs/FORMAT.md § 16) and in every post and fetch
//! frame. The rendezvous takes a frame only when its token equals the
//! token of the run its scope names, compared in constant time: a peer that
//! can reach the rendezvous port but never saw the plan cannot post into a
//! run, or read its filter. A token binds one execution: a frame of another
//! query, or of an earlier run of the same plan, names another scope or
//! carries another token, and is refused.

use super::Scope;
use std::fmt;

/// An execution's secret: 128 random bits.
pub(crate) type Token = [u8; 16];

/// What names one execution's runs and proves a frame comes from its plan.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RunKey {
    /// The execution's scope (names its run of each filter).
    pub(crate) scope: Scope,
    /// The execution's secret.
    pub(crate) token: Token,
}

impl fmt::Debug for RunKey {
    /// The scope only: a plan's debug output never shows the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunKey {{ scope: {}, token: <redacted> }}", self.scope)
    }
}

impl RunKey {
    /// A key of `scope` with a fresh token from the OS's RNG; an error when
    /// the RNG fails (the query then fails rather than run without one).
    pub(crate) fn fresh(scope: Scope) -> Result<RunKey, String> {
        let mut token = Token::default();
        getrandom::fill(&mut token)
            .map_err(|e| format!("no random token for the runtime filters: {e}"))?;
        Ok(RunKey { scope, token })
    }
}

/// Whether two tokens are equal, in a time that does not depend on where
/// they differ: every byte is read, the differences are OR-ed, and the
/// result is looked at once (no early exit that would tell a peer how many
/// leading bytes it guessed right).
pub(crate) fn tokens_match(a: &Token, b: &Token) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_when_every_byte_does() {
        let a: Token = core::array::from_fn(|i| i as u8);
        assert!(tokens_match(&a, &a));
        for i in 0..16 {
            for bit in 0..8 {
                let mut b = a;
                b[i] ^= 1 << bit;
                assert!(!tokens_match(&a, &b), "byte {i} bit {bit}");
            }
        }
        assert!(!tokens_match(&a, &Token::default()));
    }

    #[test]
    fn fresh_keys_differ_and_hide_their_token() {
        let (a, b) = (RunKey::fresh(1).unwrap(), RunKey::fresh(1).unwrap());
        assert_ne!(a.token, b.token);
        assert_ne!(a.token, Token::default());
        let shown = format!("{a:?}");
        assert!(
            shown.contains("redacted") && shown.contains("scope: 1"),
            "{shown}"
        );
    }
}
