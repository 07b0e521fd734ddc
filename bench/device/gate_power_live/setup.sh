# shellcheck shell=bash
# sourced after the README's wheel-install line: the collection link, env, and mkvenv N (a venv per run: its own knob file)
mkdir -p /tmp/coll/ansible_collections/sglang /tmp/o && ln -sfn "$PWD" /tmp/coll/ansible_collections/sglang/deploy
export PYTHONPATH=/tmp/site:/tmp/coll PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES= HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
SP=$(python3 -c 'import importlib.util,os;print(os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin)))')
[ -n "$SP" ] && [ -d "$SP" ] || { echo "no site-packages with torch"; exit 1; }
mkvenv() {
  python3 -m venv --without-pip /tmp/r$1/venv || return 1
  echo "import site; site.addsitedir('$SP')" > "$(/tmp/r$1/venv/bin/python -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')/zz-base.pth"
}
ARGS="--num-prompts 8 --output-len 32 --tokens-per-s 200 --jitter-period-s 1 --baseline-reps 3 --gate-reps 3 --levels 1,4 --max-pairs 8"
