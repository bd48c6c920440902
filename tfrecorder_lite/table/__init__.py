"""Tables: each source (CSV, folders, COCO, VOC, AutoML, Vertex AI, YOLO) read into the
table of its task."""
