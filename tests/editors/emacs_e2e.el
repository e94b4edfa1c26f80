;;; emacs_e2e.el --- Emacs + eglot + editors/emacs/synconfroute.el against the real server  -*- lexical-binding: t; -*-

;; Drives Emacs in batch mode like a user: M-x eglot on a Python file starts the server
;; through the package's registration, completion-at-point offers and inserts the
;; completion, eldoc shows the route card, the status and local-only commands talk to
;; the server.  What it saw goes to $SYNCONFROUTE_E2E_RESULT (JSON) for
;; tests/test_editors.py to judge.

;;; Code:

(require 'json)
(require 'subr-x)
(add-to-list 'load-path (expand-file-name "editors/emacs" (getenv "SYNCONFROUTE_E2E_ROOT")))
(require 'synconfroute)

(setq synconfroute-command (json-parse-string (getenv "SYNCONFROUTE_E2E_CMD") :array-type 'list)
      synconfroute-settings '(:routing (:threshold -0.7)))
(synconfroute-setup)

(load (expand-file-name "e2e_lib.el" (file-name-directory load-file-name)) nil t)
(setq e2e-wait-seconds 20
      e2e-poll-seconds 0.05)

(defun e2e-eldoc ()
  "What eldoc displays at point: the strings of all its documentation functions."
  (let* ((shown nil)
         (eldoc-display-functions (list (lambda (docs _interactive) (setq shown docs)))))
    (eldoc-print-current-symbol-info t)
    (e2e-wait "eldoc" (lambda () shown) 10)
    (mapconcat #'car shown "\n")))

(condition-case err
    (progn
      (find-file (getenv "SYNCONFROUTE_E2E_FILE"))
      (e2e-put "mode" (symbol-name major-mode))
      (call-interactively #'eglot)      ; M-x eglot
      (e2e-wait "the buffer to be managed" #'eglot-managed-p)
      (let ((server (eglot-current-server)))
        (e2e-put "server_class" (symbol-name (eieio-object-class server)))
        (e2e-put "capf" (symbol-name (car completion-at-point-functions)))
        ;; Look: what completion-at-point would offer at the end of "    return ".
        (goto-char (point-min))
        (forward-line 1)
        (end-of-line)
        (let* ((capf (funcall (car completion-at-point-functions)))
               (table (nth 2 capf))
               (props (nthcdr 3 capf))
               (cands (all-completions "" table)))
          (e2e-put "candidates" cands)
          (e2e-put "annotation" (funcall (plist-get props :annotation-function) (car cands)))
          (e2e-put "doc" (with-current-buffer
                             (funcall (plist-get props :company-doc-buffer) (car cands))
                           (buffer-string))))
        ;; The route card through eldoc (eglot's hover) on that line.
        (e2e-put "eldoc_before" (e2e-eldoc))
        ;; Take it: C-M-i.
        (setq e2e-step "completion-at-point")
        (completion-at-point)
        (e2e-put "line" (buffer-substring-no-properties (line-beginning-position)
                                                        (line-end-position)))
        (e2e-put "last_route" synconfroute-last-route)
        ;; After the edit, eldoc still shows the route on the inserted line.
        (e2e-put "eldoc_after" (e2e-eldoc))
        (let ((status (e2e-wait "the accept to reach the server"
                                (lambda ()
                                  (let ((st (synconfroute-status)))
                                    (and (> (plist-get st :accepted) 0) st))))))
          (e2e-put "status" (list (cons "accepted" (plist-get status :accepted))
                                  (cons "completions" (plist-get status :completions))
                                  (cons "local" (plist-get (plist-get status :routes) :local))
                                  (cons "threshold" (plist-get status :threshold))))
          (e2e-put "status_line" (synconfroute-format-status status)))
        (e2e-put "local_only" (if (synconfroute-toggle-local-only) "on" "off"))
        (e2e-put "local_only_status"
                 (if (synconfroute--json-true (plist-get (synconfroute-status) :local_only))
                     "on" "off"))
        (setq e2e-step "shutdown")
        (eglot-shutdown server))
      (e2e-finish nil))
  (error (e2e-finish (error-message-string err))))

;;; emacs_e2e.el ends here
