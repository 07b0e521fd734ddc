# The two commands of the README:
#   make up    install the tooling, create the embedded lab host, deploy site.yml onto it
#   make test  install the tooling, run the whole test suite (what .ci/run runs)
# and, after `make up`:
#   make demo  the whole job on the lab host, its server a named TEST DOUBLE of SGLang (no GPU): up,
#              verify (baseline, gate, report, chart), a slower release failed by the gate, rolled back
.PHONY: bootstrap up demo test lint down

bootstrap:
	scripts/bootstrap

up: bootstrap
	.venv/bin/sglang-deploy lab create
	.venv/bin/sglang-deploy up

demo:
	.venv/bin/sglang-deploy lab demo

down:
	.venv/bin/sglang-deploy lab destroy

test: bootstrap
	scripts/test

lint: 
	scripts/bootstrap --no-images
	scripts/test lint python
