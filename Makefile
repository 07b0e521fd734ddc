# The two commands of the README:
#   make up    install the tooling, create the embedded lab host, deploy site.yml onto it
#   make test  install the tooling, run the whole test suite (what .ci/run runs)
# and, after `make up`:
#   make demo  the whole job on the lab host, its server a named TEST DOUBLE of SGLang (no GPU): up,
#              verify (baseline, gate, report, chart), a slower release failed by the gate, rolled back
#   make demo-fleet  SGLang's router in front of two replica hosts (the same test double), an
#              `up --serial 1` roll behind it under a live load: requests sent and failed counted
#   make down  remove the lab host and the demo's fleet
.PHONY: bootstrap up demo demo-fleet test lint down

bootstrap:
	scripts/bootstrap

up: bootstrap
	.venv/bin/sglang-deploy lab create
	.venv/bin/sglang-deploy up

demo:
	.venv/bin/sglang-deploy lab demo

demo-fleet:
	.venv/bin/sglang-deploy lab demo --fleet

down:
	.venv/bin/sglang-deploy lab destroy
	.venv/bin/sglang-deploy lab destroy --fleet

test: bootstrap
	scripts/test

lint: 
	scripts/bootstrap --no-images
	scripts/test lint python
