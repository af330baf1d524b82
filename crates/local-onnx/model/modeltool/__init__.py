"""The model tool behind `ripcord_model.py`: a converter (GGUF -> ONNX) and a verifier (ONNX Runtime)."""
