# The two commands of the README:
#   make up    install the tooling, create the embedded lab host, deploy site.yml onto it
#   make test  install the tooling, run the whole test suite (what .ci/run runs)
.PHONY: bootstrap up test lint down

bootstrap:
	scripts/bootstrap

up: bootstrap
	.venv/bin/sglang-deploy lab create
	.venv/bin/sglang-deploy up

down:
	.venv/bin/sglang-deploy lab destroy

test: bootstrap
	scripts/test

lint: 
	scripts/bootstrap --no-images
	scripts/test lint python
