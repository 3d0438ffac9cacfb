"""Real servers on loopback for end-to-end tests: a fault-injecting vLLM-like
upstream (:mod:`tests.support.upstream`) and a minimal ladder proxy
(:mod:`tests.support.proxy`)."""
