;;; synconfroute-tests.el --- ERT tests of synconfroute.el  -*- lexical-binding: t; -*-

;; emacs --batch -L editors/emacs -l ert -l editors/emacs/synconfroute-tests.el \
;;       -f ert-run-tests-batch-and-exit

;;; Code:

(require 'ert)
(require 'json)
(require 'synconfroute)

(defmacro synconfroute-tests--with-programs (&rest body)
  "Run BODY with eglot's server table and hooks restored afterwards."
  `(let ((eglot-server-programs (copy-sequence eglot-server-programs))
         (eglot-managed-mode-hook eglot-managed-mode-hook))
     ,@body))

(ert-deftest synconfroute-setup-registers-the-modes ()
  (synconfroute-tests--with-programs
   (let ((synconfroute-command (list (executable-find "sh") "serve")))
     (synconfroute-setup)
     (dolist (case '((python-mode . "python") (java-mode . "java") (c++-mode . "cpp")
                     (c-mode . "c") (js-mode . "javascript") (typescript-mode . "typescript")
                     (go-mode . "go") (rust-mode . "rust") (python-ts-mode . "python")))
       (pcase-let ((`(,modes ,language-id ,contact) (eglot--lookup-mode (car case))))
         (should (eq (car modes) (car case)))
         (should (equal language-id (cdr case)))
         (should (eq contact #'synconfroute--contact))))
     (should (memq #'synconfroute--managed eglot-managed-mode-hook)))))

(ert-deftest synconfroute-setup-twice-keeps-one-entry ()
  (synconfroute-tests--with-programs
   (synconfroute-setup)
   (synconfroute-setup)
   (should (= 1 (cl-count #'synconfroute--contact eglot-server-programs :key #'cdr)))))

(ert-deftest synconfroute-contact-is-the-command-with-our-class ()
  (let ((synconfroute-command (list (executable-find "sh") "serve" "--flag")))
    (should (equal (synconfroute--contact)
                   (list 'synconfroute-server (executable-find "sh") "serve" "--flag")))))

(ert-deftest synconfroute-contact-explains-a-missing-program ()
  (let* ((synconfroute-command '("synconfroute-no-such-program" "serve"))
         (err (should-error (synconfroute--contact) :type 'user-error)))
    (should (string-match-p "not found on exec-path" (cadr err)))
    (should (string-match-p "synconfroute-command" (cadr err)))))

(ert-deftest synconfroute-contact-rejects-a-bad-command ()
  (let ((synconfroute-command "synconfroute serve"))
    (should-error (synconfroute--contact) :type 'user-error)))

(ert-deftest synconfroute-settings-become-initialization-options ()
  (let* ((synconfroute-settings '(:local (:backend "ollama")
                                  :privacy (:local_only t :never_send ["*.env"])
                                  :editor (:diagnostics :json-false)))
         (json (json-parse-string (jsonrpc--json-encode (synconfroute--initialization-options))
                                  :object-type 'alist :false-object nil)))
    (should (equal (alist-get 'backend (alist-get 'local json)) "ollama"))
    (should (eq (alist-get 'local_only (alist-get 'privacy json)) t))
    (should (equal (alist-get 'never_send (alist-get 'privacy json)) ["*.env"]))
    (should (assq 'diagnostics (alist-get 'editor json)))
    (should-not (alist-get 'diagnostics (alist-get 'editor json)))))

(ert-deftest synconfroute-no-settings-send-an-empty-object ()
  (let ((synconfroute-settings nil))
    (should (equal (jsonrpc--json-encode (synconfroute--initialization-options)) "{}"))))

(ert-deftest synconfroute-status-line ()
  (let ((status '(:local_only :json-false :local "ollama at http://127.0.0.1:11434"
                  :remote "http://gpu:8000/v1" :completions 3
                  :routes (:local 2 :remote 1 :none 0) :accepted 1
                  :last "synconfroute: remote (unconfident, confidence -1.20)")))
    (should (equal (synconfroute-format-status status)
                   (concat "synconfroute: local ollama at http://127.0.0.1:11434; "
                           "remote http://gpu:8000/v1; local-only off; 3 completions "
                           "(2 local, 1 remote, 0 none), 1 taken; "
                           "last: synconfroute: remote (unconfident, confidence -1.20)")))
    (should (string-match-p "local-only on; .* last: -$"
                            (synconfroute-format-status
                             '(:local_only t :local "embedded" :remote "not configured"
                               :completions 0 :routes (:local 0 :remote 0 :none 0)
                               :accepted 0 :last nil))))))

(ert-deftest synconfroute-commands-need-a-synconfroute-buffer ()
  (with-temp-buffer
    (let ((err (should-error (synconfroute-status) :type 'user-error)))
      (should (string-match-p "M-x eglot" (cadr err))))
    (should-error (synconfroute-toggle-local-only) :type 'user-error)))

(ert-deftest synconfroute-eldoc-shows-the-card-on-the-completed-lines ()
  (with-temp-buffer
    (insert "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n")
    (let ((synconfroute-last-route "synconfroute: local (confident-and-valid)")
          shown)
      (setq synconfroute--last
            (list (copy-marker 27) (copy-marker 32 t) "**synconfroute**: local"))
      (goto-char 20)
      (should (synconfroute-eldoc-function (lambda (doc &rest plist) (setq shown (cons doc plist)))))
      (should (equal shown '("**synconfroute**: local"
                             :echo "synconfroute: local (confident-and-valid)")))
      (goto-char (point-max))
      (setq shown nil)
      (should-not (synconfroute-eldoc-function (lambda (&rest args) (setq shown args))))
      (should-not shown))))

(ert-deftest synconfroute-next-word-and-next-line ()
  ;; As VS Code's Accept Word: spaces, then a run of word characters or punctuation.
  (dolist (case '(("total = a + b" . "total") (" = a + b" . " =") (" a + b" . " a")
                  ("(b)" . "(") ("  " . "  ") ("\n    return x" . "\n    ") ("" . "")
                  ("été 1" . "été") ("snake_case(x)" . "snake_case")))
    (should (equal (synconfroute-next-word (car case)) (cdr case))))
  ;; Up to the line break; at one, it and the line after.
  (dolist (case '(("a + b\n    return a" . "a + b") ("\n    return a\nx" . "\n    return a")
                  ("\n" . "\n") ("one line" . "one line")))
    (should (equal (synconfroute-next-line (car case)) (cdr case)))))

(ert-deftest synconfroute-route-notification-is-the-route-data ()
  (let ((synconfroute-route nil)
        (synconfroute-last-route nil)
        (synconfroute--routes (make-hash-table :test #'equal)))
    (should (equal (synconfroute-route-string) ""))
    (synconfroute--note-route
     '(:uri "file:///p/calc.py" :id "c7" :route "remote" :reasons ["unconfident"]
       :confidence -1.234 :cacheHit :json-false
       :summary "synconfroute: remote (unconfident, confidence -1.23)"
       :card (:kind "plaintext" :value "synconfroute: remote, escalated")))
    (should (equal (synconfroute-route-string) "synconfroute: remote -1.23"))
    (should (equal synconfroute-last-route
                   "synconfroute: remote (unconfident, confidence -1.23)"))
    (should (equal (plist-get (gethash "c7" synconfroute--routes) :route) "remote"))
    (should (equal (synconfroute--card-text (plist-get synconfroute-route :card))
                   "synconfroute: remote, escalated"))
    ;; No confidence (JSON null), from the cache.
    (should (equal (synconfroute-route-string '(:route "local" :confidence nil :cacheHit t))
                   "synconfroute: local (cache)"))
    ;; Not a route: ignored.
    (synconfroute--note-route '(:route "local"))
    (should (equal (plist-get synconfroute-route :id) "c7"))))

(ert-deftest synconfroute-route-matches-the-buffer-by-uri ()
  (let* ((dir (make-temp-file "synconfroute" t))
         (file (expand-file-name "my calc.py" dir)))
    (unwind-protect
        (with-current-buffer (find-file-noselect file)
          (let ((synconfroute-route
                 (list :uri (concat "file://" (url-hexify-string (file-truename file)
                                                                 url-path-allowed-chars))
                       :summary "s")))
            (should (eq (synconfroute--route-here) synconfroute-route))
            (setq synconfroute-route (list :uri "file:///elsewhere.py" :summary "s"))
            (should-not (synconfroute--route-here)))
          (kill-buffer))
      (delete-directory dir t))))

(provide 'synconfroute-tests)
;;; synconfroute-tests.el ends here
