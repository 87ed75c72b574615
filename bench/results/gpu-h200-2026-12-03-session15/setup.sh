# device setup: lark from the carried wheel, specir editable (no registry on the device)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1 LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1
