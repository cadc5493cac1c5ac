//! Policers: single-rate (RFC 2697) and two-rate (RFC 2698) three-colour markers.
